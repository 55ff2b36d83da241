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
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from strom.config.errors import ConfigError
from strom.config.keys import ConfigKey
from strom.config.values import ConfigValue, Password, parse_value

LISTENER_PREFIX = "listener.name."

SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
"""Kafka's SASL mechanisms (the mechanism part of a prefixed key is one of them, lower case)."""


class ListenerKey(NamedTuple):
    """A `listener.name.<listener>[.<mechanism>].<key>` key, split."""

    listener: str
    """Upper case, as listener names are everywhere else."""
    mechanism: str | None
    """Upper case (SCRAM-SHA-256), or None for a key of the whole listener."""
    key: str
    """The base key (`ssl.keystore.location`)."""


def listener_overridable(key: str) -> bool:
    """Base keys Strom accepts per listener: the security ones (`ssl.*`)."""
    return key.startswith("ssl.")


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
        if spec is None or split.mechanism is not None:
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
