"""Effective topic configs and DescribeConfigs entries (value, source, synonyms).

Kafka answers DescribeConfigs for a topic with its effective value plus the
chain that produced it: the topic override, then each broker synonym that has a
value (configured or default); the source is that chain's first link. Dynamic
broker configs (stored in the metadata log) come first in a broker synonym's
chain when `BrokerLayers` are given: this broker's own, then the cluster default.
The broker's entries follow the same rules, plus Kafka's two special cases: the
cluster-default resource (only the stored defaults) and stored keys Kafka has
no type for (shown as sensitive and read-only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from strom.config.broker import BROKER_KEYS, BrokerConfig
from strom.config.config_error import ConfigError
from strom.config.dynamic import BrokerLayers
from strom.config.keys import ConfigKey
from strom.config.security import split_listener_key
from strom.config.topic import TOPIC_KEYS, TopicConfig
from strom.config.values import ConfigSource, ConfigType, ConfigValue, parse_value, to_string

BROKER_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}
"""Broker keys whose DescribeConfigs synonyms include other keys (Kafka's list)."""


@dataclass(frozen=True)
class ConfigSynonym:
    """One link of a value's provenance chain."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry."""

    name: str
    value: str | None
    source: ConfigSource
    config_type: ConfigType
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    documentation: str

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0's is_default flag."""
        return self.source is ConfigSource.DEFAULT_CONFIG


def validate_topic_overrides(
    overrides: Mapping[str, str | None], broker: BrokerConfig | None = None
) -> dict[str, ConfigValue]:
    """Parse and check topic overrides; raises ConfigError (-> INVALID_CONFIG) naming the key."""
    parsed: dict[str, ConfigValue] = {}
    for key, raw in overrides.items():
        spec = TOPIC_KEYS.get(key)
        if spec is None:
            raise ConfigError.unknown(key)
        if raw is None:
            raise ConfigError(key, f"null value not supported for topic config '{key}'")
        value = parse_value(key, spec.type, raw)
        spec.check(value)
        parsed[key] = value
    if parsed.get("remote.storage.enable") is True:
        raise ConfigError.invalid(
            "remote.storage.enable", True, "false: tiered storage is not supported by this broker"
        )
    effective = broker if broker is not None else BrokerConfig()
    low = _effective(TOPIC_KEYS["min.compaction.lag.ms"], effective, parsed)
    high = _effective(TOPIC_KEYS["max.compaction.lag.ms"], effective, parsed)
    if low > high:
        raise ConfigError.invalid(
            "min.compaction.lag.ms", low, f"at most max.compaction.lag.ms ({high})"
        )
    return parsed


def effective_topic_config(broker: BrokerConfig, overrides: Mapping[str, str]) -> TopicConfig:
    """The typed settings a topic runs with: overrides, else broker synonyms, else defaults."""
    parsed = validate_topic_overrides(overrides, broker)
    values: dict[str, Any] = {
        spec.attr: _effective(spec, broker, parsed) for spec in TOPIC_KEYS.values()
    }
    return TopicConfig(**values)


def topic_min_insync_replicas(broker: BrokerConfig, overrides: Mapping[str, str]) -> int:
    """A topic's effective min.insync.replicas over `broker`; `broker`'s own when the
    overrides do not validate (the controller validated them: a broker never refuses to serve
    over them)."""
    try:
        return effective_topic_config(broker, overrides).min_insync_replicas
    except ConfigError:
        return broker.min_insync_replicas


def resolve_topic_config(
    broker: BrokerConfig,
    overrides: Mapping[str, str],
    keys: Iterable[str] | None = None,
    include_synonyms: bool = True,
    layers: BrokerLayers | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs entries for a topic, sorted by name; unknown requested keys are skipped."""
    parsed = validate_topic_overrides(overrides, broker)
    wanted = sorted(TOPIC_KEYS) if keys is None else sorted(k for k in set(keys) if k in TOPIC_KEYS)
    entries = []
    for name in wanted:
        spec = TOPIC_KEYS[name]
        chain = (
            [ConfigSynonym(name, to_string(parsed[name]), ConfigSource.DYNAMIC_TOPIC_CONFIG)]
            if name in parsed
            else []
        )
        chain += _broker_chain(broker, [s.name for s in spec.synonyms], layers)
        entries.append(
            ConfigEntry(
                name=name,
                value=to_string(_effective(spec, broker, parsed)),
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                config_type=spec.type,
                read_only=False,
                is_sensitive=spec.sensitive,
                synonyms=tuple(chain) if include_synonyms else (),
                documentation=spec.doc,
            )
        )
    return entries


def describe_broker_config(
    broker: BrokerConfig,
    keys: Iterable[str] | None = None,
    include_synonyms: bool = True,
    layers: BrokerLayers | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs entries for this broker, sorted by name; unknown requested keys are skipped.

    With `layers`, stored dynamic keys Strom does not know are listed too, as Kafka
    lists them (see `unknown_entry`).
    """
    wanted = (
        sorted(BROKER_KEYS) if keys is None else sorted(k for k in set(keys) if k in BROKER_KEYS)
    )
    entries = []
    for name in wanted:
        spec = BROKER_KEYS[name]
        chain = _broker_chain(broker, BROKER_SYNONYMS.get(name, (name,)), layers)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if spec.sensitive else to_string(broker.get(name)),
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                config_type=spec.type,
                read_only=not spec.dynamic,
                is_sensitive=spec.sensitive,
                synonyms=tuple(chain) if include_synonyms else (),
                documentation=spec.doc,
            )
        )
    selected = None if keys is None else set(keys)
    listener_keys = _listener_entries(broker, layers, selected, include_synonyms)
    entries += listener_keys
    if layers is None:
        return sorted(entries, key=lambda e: e.name)
    stored = {**layers.cluster_default, **layers.per_broker}
    shown = {e.name for e in listener_keys}
    for key in sorted(k for k in stored if k not in BROKER_KEYS and k not in shown):
        if selected is not None and key not in selected:
            continue
        chain = [
            ConfigSynonym(key, None, source)
            for overrides, source in (
                (layers.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (layers.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            )
            if key in overrides
        ]
        entries.append(unknown_entry(key, chain, include_synonyms))
    return sorted(entries, key=lambda e: e.name)


def _listener_entries(
    broker: BrokerConfig,
    layers: BrokerLayers | None,
    selected: set[str] | None,
    include_synonyms: bool,
) -> list[ConfigEntry]:
    """Listener-prefixed security keys (`listener.name.ssl.ssl.keystore.location`), as Kafka
    lists them: set in the file or stored for this broker, typed as their base key, a
    sensitive one's value null."""
    static = layers.static if layers is not None else broker
    names = [e.name for e in static.listener_endpoints]
    stored = dict(layers.per_broker) if layers is not None else {}
    keys = set(static.listener_settings_map) | {
        k for k in stored if (s := split_listener_key(k, names)) is not None and s.key in BROKER_KEYS
    }
    entries = []
    for key in sorted(keys):
        if selected is not None and key not in selected:
            continue
        split = split_listener_key(key, names)
        assert split is not None
        spec = BROKER_KEYS[split.key]
        chain = []
        if key in stored:
            chain.append(ConfigSynonym(key, None if spec.sensitive else stored[key],
                                       ConfigSource.DYNAMIC_BROKER_CONFIG))  # fmt: skip
        if key in static.listener_settings_map:
            value = static.listener_settings_map[key]
            chain.append(ConfigSynonym(key, None if spec.sensitive else to_string(value),
                                       ConfigSource.STATIC_BROKER_CONFIG))  # fmt: skip
        entries.append(
            ConfigEntry(
                name=key,
                value=chain[0].value,
                source=chain[0].source,
                config_type=spec.type,
                read_only=not spec.dynamic,
                is_sensitive=spec.sensitive,
                synonyms=tuple(chain) if include_synonyms else (),
                documentation=spec.doc,
            )
        )
    return entries


def describe_cluster_defaults(
    defaults: Mapping[str, str], keys: Iterable[str] | None = None, include_synonyms: bool = True
) -> list[ConfigEntry]:
    """Kafka's BROKER "" resource: the stored cluster-wide dynamic defaults alone, with their
    raw stored values, each with just its DYNAMIC_DEFAULT_BROKER_CONFIG synonyms."""
    selected = None if keys is None else set(keys)
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    entries = []
    for key in sorted(k for k in defaults if selected is None or k in selected):
        spec = BROKER_KEYS.get(key)
        if spec is None:
            entries.append(unknown_entry(key, [ConfigSynonym(key, None, source)], include_synonyms))
            continue
        hidden = spec.sensitive
        chain = [
            ConfigSynonym(n, None if hidden else defaults[n], source)
            for n in BROKER_SYNONYMS.get(key, (key,))
            if n in defaults
        ]
        entries.append(
            ConfigEntry(
                name=key,
                value=None if hidden else defaults[key],
                source=source,
                config_type=spec.type,
                read_only=not spec.dynamic,
                is_sensitive=hidden,
                synonyms=tuple(chain) if include_synonyms else (),
                documentation=spec.doc,
            )
        )
    return entries


def unknown_entry(key: str, chain: list[ConfigSynonym], include_synonyms: bool) -> ConfigEntry:
    """A stored key Kafka has no type for: shown as sensitive (value null), never dynamic."""
    return ConfigEntry(
        name=key,
        value=None,
        source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
        config_type=ConfigType.UNKNOWN,
        read_only=True,
        is_sensitive=True,
        synonyms=tuple(chain) if include_synonyms else (),
        documentation="",
    )


def entry_source(entry: ConfigEntry, layers: BrokerLayers) -> ConfigSource:
    """The source of an entry resolved without `layers` (CreateTopics' configs), telling
    dynamic broker values apart from static ones by its first synonym."""
    if entry.source is not ConfigSource.STATIC_BROKER_CONFIG or not entry.synonyms:
        return entry.source
    first = entry.synonyms[0].name
    if first in layers.per_broker:
        return ConfigSource.DYNAMIC_BROKER_CONFIG
    if first in layers.cluster_default:
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return entry.source


def _broker_chain(
    broker: BrokerConfig, names: Iterable[str], layers: BrokerLayers | None = None
) -> list[ConfigSynonym]:
    """Synonym entries for the broker keys that have a value, in precedence order
    (dynamic per-broker, dynamic cluster default, then static or default, as Kafka)."""
    names = list(names)
    chain = []
    if layers is not None:
        broker = layers.static
        for stored, source in (
            (layers.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (layers.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ):
            for name in names:
                if name in stored:
                    shown = None if BROKER_KEYS[name].sensitive else stored[name]
                    chain.append(ConfigSynonym(name, shown, source))
    for name in names:
        value = broker.get(name)
        if value is None:
            continue
        source = (
            ConfigSource.STATIC_BROKER_CONFIG
            if broker.is_explicit(name)
            else ConfigSource.DEFAULT_CONFIG
        )
        shown = None if BROKER_KEYS[name].sensitive else to_string(value)
        chain.append(ConfigSynonym(name, shown, source))
    return chain


def _effective(spec: ConfigKey, broker: BrokerConfig, parsed: Mapping[str, ConfigValue]) -> Any:
    """A topic key's value: its override, else the first broker synonym set, else the default."""
    if spec.name in parsed:
        return parsed[spec.name]
    for synonym in spec.synonyms:
        value = broker.get(synonym.name)
        if value is not None:
            return synonym.convert(value)
    return spec.default
