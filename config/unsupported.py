"""Settings Strom refuses because it does not implement what they ask for yet: fail closed.

Kafka accepts these keys; a broker that accepted them and went on serving would do less than
they ask: delegation tokens that authenticate no one, Java security providers that are never
loaded. So a configuration that asks for them stops start-up (and a dynamic change to such a key
is refused) with a message naming the key. TLS, SASL and the StandardAuthorizer are
implemented (docs/security.md).
"""

from __future__ import annotations

from strom.config.config_error import ConfigError

SECURITY_KEYS = frozenset({"security.providers"})
SECURITY_PREFIXES = ("delegation.token.",)
SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})

_WHY = "Strom does not implement delegation tokens or Java security providers"


def _is_security_key(key: str) -> bool:
    if key in SECURITY_KEYS or key.startswith(SECURITY_PREFIXES):
        return True
    if key.startswith("listener.name."):
        # listener.name.<listener>.<key>
        rest = key[len("listener.name.") :].split(".", 1)[-1]
        return _is_security_key(rest)
    return False


def refuse_security_key(key: str) -> None:
    """ConfigError if `key` configures security Strom does not implement."""
    if _is_security_key(key):
        raise ConfigError(key, f"config key '{key}' is refused: {_WHY}; remove it")


def refuse_security_protocol(key: str, listener: str, protocol: str) -> None:
    """ConfigError if a listener would need a security protocol Strom does not serve yet."""
    if protocol.upper() not in SUPPORTED_PROTOCOLS:
        raise ConfigError(
            key,
            f"listener {listener} uses security protocol {protocol}, which is refused: {_WHY}; "
            "use a PLAINTEXT or SSL listener",
            protocol,
        )
