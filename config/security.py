"""Security keys given per listener, and the TLS settings a listener runs with.

Kafka lets every `ssl.*` key (and the SASL keys) be set for one listener by prefixing it with
`listener.name.<listener>.` (the listener's name in lower case), and the mechanism-specific SASL
keys for one mechanism of one listener with `listener.name.<listener>.<mechanism>.` (e.g.
`listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config`). A prefixed value wins over the
unprefixed one for that listener only. This module splits such keys, checks them against the
base key's type and validator, and answers "what is the value of this key on that listener".

`SslSettings` gathers the effective `ssl.*` values of one listener: what the broker needs to
build its TLS context (`strom.broker.security.tls`), and what a node needs to connect to another
node's listener. Passwords stay `Password` values (printed as `[hidden]`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from strom.config.config_error import ConfigError
from strom.config.ignored import is_ignored
from strom.config.keys import ConfigKey
from strom.config.values import ConfigValue, Password, parse_value

LISTENER_PREFIX = "listener.name."

SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
"""Kafka's SASL mechanisms (the mechanism part of a prefixed key is one of them, lower case)."""
SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
"""The ones Strom serves (GSSAPI is Kerberos)."""
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
"""The JAAS login module each mechanism's sasl.jaas.config names (Kafka's)."""
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""The one authorizer Strom runs (ACLs in the metadata log)."""
DEFAULT_PRINCIPAL_BUILDER = (
    "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
)
OAUTH_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
OAUTH_VALIDATOR_3X = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
)
"""sasl.server.callback.handler.class values for JWT validation against a JWKS (KIP-768)."""


class ListenerKey(NamedTuple):
    """A `listener.name.<listener>[.<mechanism>].<key>` key, split."""

    listener: str
    """Upper case, as listener names are everywhere else."""
    mechanism: str | None
    """Upper case (SCRAM-SHA-256), or None for a key of the whole listener."""
    key: str
    """The base key (`ssl.keystore.location`)."""


def listener_overridable(key: str) -> bool:
    """Base keys Strom accepts per listener: the security ones (`ssl.*`, `sasl.*`, ...) and
    the connection limits."""
    return key.startswith(("ssl.", "sasl.")) or key in (
        "connections.max.reauth.ms",
        "principal.builder.class",
        "max.connection.creation.rate",
        "max.connections",
    )


def mechanism_overridable(key: str) -> bool:
    """Base keys Strom accepts per mechanism of a listener (`<mech>.sasl.jaas.config`)."""
    return (key.startswith("sasl.") and key != "sasl.enabled.mechanisms") or (
        key == "connections.max.reauth.ms"
    )


def split_listener_key(key: str, listener_names: Iterable[str]) -> ListenerKey | None:
    """Split a listener-prefixed key, or None when `key` is no `listener.name.` key.

    Listener names may contain dots, so the configured names (`listener_names`) are tried
    first, longest first; otherwise the listener is the segment after the prefix.
    """
    if not key.startswith(LISTENER_PREFIX):
        return None
    rest = key[len(LISTENER_PREFIX) :]
    listener = next(
        (
            name
            for name in sorted(listener_names, key=len, reverse=True)
            if rest.lower().startswith(name.lower() + ".")
        ),
        None,
    )
    if listener is None:
        listener, _, _ = rest.partition(".")
    base = rest[len(listener) + 1 :]
    first, _, after = base.partition(".")
    if first.upper() in SASL_MECHANISMS and after:
        return ListenerKey(listener.upper(), first.upper(), after)
    return ListenerKey(listener.upper(), None, base)


def parse_listener_settings(
    props: Mapping[str, str],
    known: Mapping[str, ConfigKey],
    listener_names: Iterable[str],
) -> dict[str, ConfigValue]:
    """The listener-prefixed security keys of `props`, parsed and validated with their base
    key's definition; ConfigError naming the full key when one is wrong."""
    names = list(listener_names)
    parsed: dict[str, ConfigValue] = {}
    for full, raw in props.items():
        split = split_listener_key(full, names)
        if split is None or not listener_overridable(split.key):
            continue
        spec = known.get(split.key)
        if spec is None and is_ignored(split.key):
            continue
        if spec is None or (split.mechanism is not None and not mechanism_overridable(split.key)):
            raise ConfigError.unknown(full)
        try:
            value = parse_value(full, spec.type, raw)
            spec.check(value)
        except ConfigError as exc:
            raise ConfigError(full, str(exc).replace(f"'{split.key}'", f"'{full}'")) from exc
        parsed[full] = value
    return parsed


def listener_value(
    settings: Mapping[str, ConfigValue],
    base: ConfigValue,
    listener: str,
    key: str,
    mechanism: str | None = None,
) -> ConfigValue:
    """The value of `key` on `listener` (for `mechanism`): the most specific prefixed setting
    in `settings`, else `base`, the unprefixed value."""
    prefix = f"{LISTENER_PREFIX}{listener.lower()}."
    if mechanism is not None:
        found = settings.get(f"{prefix}{mechanism.lower()}.{key}")
        if found is not None:
            return found
    found = settings.get(prefix + key)
    return base if found is None else found


class SslSettings(NamedTuple):
    """The effective ssl.* values of one listener."""

    listener: str
    protocol: str
    enabled_protocols: tuple[str, ...]
    cipher_suites: tuple[str, ...]
    keystore_type: str
    keystore_location: str | None
    keystore_password: Password | None
    key_password: Password | None
    keystore_key: Password | None
    keystore_certificate_chain: Password | None
    truststore_type: str
    truststore_location: str | None
    truststore_password: Password | None
    truststore_certificates: Password | None
    client_auth: str
    endpoint_identification_algorithm: str | None
    principal_mapping_rules: str
    allow_dn_changes: bool
    allow_san_changes: bool

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key or self.keystore_certificate_chain)


SSL_SETTING_KEYS: Mapping[str, str] = {
    field: "ssl." + field.replace("_", ".") for field in SslSettings._fields if field != "listener"
}
"""SslSettings field -> its key."""


# --- ssl.principal.mapping.rules ------------------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class PrincipalRule(NamedTuple):
    """One rule of ssl.principal.mapping.rules: DEFAULT (pattern None) or
    RULE:pattern/replacement/[LU]."""

    pattern: re.Pattern[str] | None
    replacement: str
    case: str
    """"L" lower-cases the result, "U" upper-cases it, "" leaves it."""

    def apply(self, name: str) -> str | None:
        """The mapped name, or None when the rule does not match `name` whole."""
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(lambda m: _java_replacement(m, self.replacement), name)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def parse_principal_mapping_rules(value: str, key: str = "ssl.principal.mapping.rules") -> tuple[PrincipalRule, ...]:
    """Parse the rules as Kafka's SslPrincipalMapper does; ConfigError naming `key` if one is
    not a rule."""
    rules: list[PrincipalRule] = []
    text = value.strip()
    for match in _RULE_SPLITTER.finditer(text):
        rule = match.group(1)
        if not rule and match.end() >= len(text):
            break
        parsed = _RULE_PARSER.fullmatch(rule)
        if parsed is None or parsed.group(5):
            raise ConfigError.invalid(key, value, "RULE:pattern/replacement/[LU] or DEFAULT rules "
                                      f"separated by commas ({rule!r} is neither)")
        if parsed.group(1):
            rules.append(PrincipalRule(None, "", ""))
            continue
        try:
            pattern = re.compile(parsed.group(2))
        except re.error as exc:
            raise ConfigError.invalid(key, value, f"valid regular expressions ({exc})") from None
        rules.append(PrincipalRule(pattern, parsed.group(3), parsed.group(4)))
    return tuple(rules)


def map_principal(rules: Iterable[PrincipalRule], name: str) -> str | None:
    """The first rule's mapping of a distinguished name, or None when no rule applies (Kafka
    then fails the authentication)."""
    for rule in rules:
        mapped = rule.apply(name)
        if mapped is not None:
            return mapped
    return None


def _java_replacement(match: re.Match[str], replacement: str) -> str:
    """Java's Matcher replacement syntax: $n is group n, a backslash quotes the next char."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif char == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            while j < len(replacement) and replacement[j].isdigit() and int(replacement[i + 1 : j + 1]) <= (match.re.groups or 0):
                j += 1
            group = int(replacement[i + 1 : j]) if j > i + 1 else 0
            out.append(match.group(group) or "")
            i = j
        else:
            out.append(char)
            i += 1
    return "".join(out)


# --- sasl.jaas.config -----------------------------------------------------------------------------

_JAAS_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:\\.|[^"\\])*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))')
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasModule(NamedTuple):
    """One login module of a `sasl.jaas.config` value: its class, flag and options."""

    login_module: str
    flag: str
    options: Mapping[str, str]


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> tuple[JaasModule, ...]:
    """Parse `Module required opt="value" ...;` (one or more modules), as Kafka's JaasConfig
    does; ConfigError naming `key` (and never the value: it holds passwords) when malformed."""

    def fail(why: str) -> ConfigError:
        return ConfigError(key, f"invalid value for config key '{key}': {why}; expected "
                           'LoginModuleClass required option="value" ... ;')  # fmt: skip

    tokens: list[tuple[str, str]] = []
    pos = 0
    stripped = text.rstrip()
    while pos < len(stripped):
        match = _JAAS_TOKEN.match(stripped, pos)
        if match is None or match.end() == pos:
            raise fail("unexpected character")
        pos = match.end()
        if match["quoted"] is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"][1:-1])))
        elif match["word"] is not None:
            tokens.append(("word", match["word"]))
        else:
            tokens.append(("punct", match["punct"]))
    modules: list[JaasModule] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "word":
            raise fail("a login module class and a control flag come first")
        module, flag = tokens[i][1], tokens[i + 1][1].lower()
        if flag not in CONTROL_FLAGS:
            raise fail(f"unknown control flag (expected one of {', '.join(CONTROL_FLAGS)})")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("punct", ";"):
            if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1] != ("punct", "="):
                raise fail("options are name=value pairs")
            kind, value = tokens[i + 2]
            if kind == "punct":
                raise fail(f"option {tokens[i][1]} has no value")
            options[tokens[i][1]] = value
            i += 3
        if i >= len(tokens):
            raise fail("it must end with ';'")
        i += 1
        modules.append(JaasModule(module, flag, options))
    if not modules:
        raise fail("it is empty")
    return tuple(modules)


# --- SASL listeners: what each enabled mechanism needs ----------------------------------------

ListenerLookup = Callable[..., ConfigValue]
"""`lookup(key, mechanism=None)`: a key's value on one listener (BrokerConfig.listener_value)."""


def jaas_key(listener: str, mechanism: str) -> str:
    return f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def listener_jaas(listener: str, mechanism: str, lookup: ListenerLookup) -> JaasModule | None:
    """The JAAS module of `mechanism` on `listener`, or None when none is configured."""
    value = lookup("sasl.jaas.config", mechanism)
    if value is None:
        return None
    text = value.reveal() if isinstance(value, Password) else str(value)
    modules = parse_jaas(text, jaas_key(listener, mechanism))
    if len(modules) != 1:
        raise ConfigError(jaas_key(listener, mechanism),
                          f"{jaas_key(listener, mechanism)} must name exactly one login module")  # fmt: skip
    return modules[0]


def check_sasl_listener(listener: str, lookup: ListenerLookup) -> None:
    """A SASL listener's mechanisms are ones Strom serves, each with its login module."""
    mechanisms = lookup("sasl.enabled.mechanisms")
    assert isinstance(mechanisms, tuple)
    key = f"{LISTENER_PREFIX}{listener.lower()}.sasl.enabled.mechanisms"
    if not mechanisms:
        raise ConfigError(key, f"SASL listener {listener} enables no mechanism: set {key}")
    if "GSSAPI" in mechanisms:
        raise ConfigError(
            key,
            f"SASL listener {listener} enables GSSAPI (Kerberos, Kafka's default), which Strom "
            f"does not implement: set {key} (or sasl.enabled.mechanisms) to some of "
            + ", ".join(SERVED_MECHANISMS),
        )
    for mechanism in mechanisms:
        module = listener_jaas(listener, mechanism, lookup)
        where = jaas_key(listener, mechanism)
        if module is None:
            raise ConfigError(
                where,
                f"SASL listener {listener} enables {mechanism} but has no login module: set "
                f"{where}={LOGIN_MODULES[mechanism]} required ...;",
            )
        if module.login_module != LOGIN_MODULES[mechanism]:
            raise ConfigError(
                where,
                f"{where} names {module.login_module}; {mechanism} takes "
                f"{LOGIN_MODULES[mechanism]}",
            )
        handler = lookup("sasl.server.callback.handler.class", mechanism)
        if handler and mechanism != "OAUTHBEARER":
            raise ConfigError(
                "sasl.server.callback.handler.class",
                f"a server callback handler applies to OAUTHBEARER only (listener {listener} "
                f"sets one for {mechanism})",
            )
        if handler and not lookup("sasl.oauthbearer.jwks.endpoint.url", mechanism):
            raise ConfigError(
                "sasl.oauthbearer.jwks.endpoint.url",
                f"listener {listener} validates OAUTHBEARER tokens with {handler}, which needs "
                "sasl.oauthbearer.jwks.endpoint.url (an https:// or file: URL of the JWKS)",
            )


def check_client_jaas(listener: str, mechanism: str, lookup: ListenerLookup) -> None:
    """The login module a node authenticates to `listener` with names a user."""
    module = listener_jaas(listener, mechanism, lookup)
    where = jaas_key(listener, mechanism)
    if module is None:
        return  # check_sasl_listener reports it
    if mechanism == "OAUTHBEARER":
        if lookup("sasl.server.callback.handler.class", mechanism):
            raise ConfigError(
                "sasl.mechanism.inter.broker.protocol",
                f"nodes cannot authenticate to listener {listener} with OAUTHBEARER against a "
                "JWKS (Strom has no token endpoint client): use SCRAM or PLAIN between nodes",
            )
        if "unsecuredLoginStringClaim_sub" not in module.options:
            raise ConfigError(where, f"{where} needs unsecuredLoginStringClaim_sub, the name "
                              "this node authenticates as to other nodes")  # fmt: skip
        return
    if "username" not in module.options or "password" not in module.options:
        raise ConfigError(
            where,
            f"{where} needs username and password: the user this node authenticates as to "
            "other nodes",
        )
