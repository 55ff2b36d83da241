"""Settings Strom refuses because it does not implement what they ask for yet: fail closed.

Kafka accepts these keys; a broker that accepted them and went on serving would leave the port
open: a keystore that encrypts nothing, a SASL mechanism that authenticates no one, an
authorizer that allows everything. So a configuration that asks for security stops start-up
(and a dynamic change to such a key is refused) with a message naming the key. The list shrinks
as TLS, SASL and ACLs land.
"""

from __future__ import annotations

from strom.config.config_error import ConfigError

SECURITY_KEYS = frozenset(
    {
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "principal.builder.class",
        "security.providers",
        "connections.max.reauth.ms",
        "connection.failed.authentication.delay.ms",
    }
)
SECURITY_PREFIXES = ("ssl.", "sasl.", "delegation.token.")
SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT"})

_WHY = "Strom does not implement TLS, SASL or ACLs yet (the port would serve plaintext to anyone)"


def _is_security_key(key: str) -> bool:
    if key in SECURITY_KEYS or key.startswith(SECURITY_PREFIXES):
        return True
    if key.startswith("listener.name."):
        # listener.name.<listener>.<key> and listener.name.<listener>.<mechanism>.sasl.<key>
        rest = key[len("listener.name.") :].split(".", 1)[-1]
        return _is_security_key(rest) or ".sasl." in f".{rest}" or ".ssl." in f".{rest}"
    return False


def refuse_security_key(key: str) -> None:
    """ConfigError if `key` configures security Strom does not implement."""
    if _is_security_key(key):
        raise ConfigError(key, f"config key '{key}' is refused: {_WHY}; remove it")


def refuse_security_protocol(key: str, listener: str, protocol: str) -> None:
    """ConfigError if a listener would need a security protocol other than PLAINTEXT."""
    if protocol.upper() not in SUPPORTED_PROTOCOLS:
        raise ConfigError(
            key,
            f"listener {listener} uses security protocol {protocol}, which is refused: {_WHY}; "
            "use a PLAINTEXT listener",
            protocol,
        )
