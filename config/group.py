"""Group configs: the settings of ConfigResource GROUP (KIP-848), as in Kafka 4.1.

A group config overrides, for one group id, a broker-wide default of the consumer, share or
streams group protocols (`consumer.session.timeout.ms` over `group.consumer.session.timeout.ms`,
...). They are stored in the metadata log as ConfigRecords of resource type GROUP, so every
broker describes the same values and they survive restarts. Classic-protocol groups ignore
them, as in Kafka: Strom's groups are all classic, so storing and describing them is the whole
of Kafka's behaviour here.

`GroupConfig` declares the keys (type, Kafka's static default, base validator; the broker key a
default comes from is the key's synonym). `validate_group_overrides` checks a resource's whole
new override set as Kafka's controller does (unknown keys, types, the broker's min/max bounds,
session longer than heartbeat), and `describe_group_config` gives the DescribeConfigs entries:
the override (source GROUP_CONFIG) or the broker's default (DEFAULT_CONFIG), never read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from strom.config.broker import BrokerConfig
from strom.config.config_error import ConfigError
from strom.config.keys import ConfigKey, Synonym, keys_of, setting
from strom.config.resolve import ConfigEntry, ConfigSynonym
from strom.config.validators import Validator, at_least, matches, one_of
from strom.config.values import ConfigSource, ConfigType, ConfigValue, parse_value, to_string

_ISO_DURATION = r"(?i)P(?=\d|T\d)(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+([.,]\d{0,9})?S)?)?"
SHARE_AUTO_OFFSET_RESET = Validator(
    "earliest, latest or by_duration:<a non-negative ISO-8601 duration, PnDTnHnMn.nS>",
    lambda v: (
        v in ("earliest", "latest")
        or (
            v.startswith("by_duration:")
            and matches(_ISO_DURATION, "").accepts(v[len("by_duration:") :].strip())
        )
    ),
)


def _from(broker_key: str) -> tuple[Synonym, ...]:
    return (Synonym(broker_key),)


@dataclass(frozen=True)
class GroupConfig:
    """One group's settings (defaults are Kafka's static ones; the broker's keys named as
    synonyms supply the effective defaults)."""

    consumer_session_timeout_ms: int = setting(
        "consumer.session.timeout.ms", ConfigType.INT, 45000,
        "Consumer-protocol groups: how long a member may go without a heartbeat.",
        validator=at_least(1), synonyms=_from("group.consumer.session.timeout.ms"),
    )  # fmt: skip
    consumer_heartbeat_interval_ms: int = setting(
        "consumer.heartbeat.interval.ms", ConfigType.INT, 5000,
        "Consumer-protocol groups: the heartbeat interval given to members.",
        validator=at_least(1), synonyms=_from("group.consumer.heartbeat.interval.ms"),
    )  # fmt: skip
    share_session_timeout_ms: int = setting(
        "share.session.timeout.ms", ConfigType.INT, 45000,
        "Share groups: how long a member may go without a heartbeat.",
        validator=at_least(1), synonyms=_from("group.share.session.timeout.ms"),
    )  # fmt: skip
    share_heartbeat_interval_ms: int = setting(
        "share.heartbeat.interval.ms", ConfigType.INT, 5000,
        "Share groups: the heartbeat interval given to members.",
        validator=at_least(1), synonyms=_from("group.share.heartbeat.interval.ms"),
    )  # fmt: skip
    share_record_lock_duration_ms: int = setting(
        "share.record.lock.duration.ms", ConfigType.INT, 30000,
        "Share groups: how long a delivered record stays acquired by its consumer.",
        validator=at_least(1000), synonyms=_from("group.share.record.lock.duration.ms"),
    )  # fmt: skip
    share_auto_offset_reset: str = setting(
        "share.auto.offset.reset", ConfigType.STRING, "latest",
        "Share groups: where a share-partition starts: earliest, latest, or by_duration:<ISO-8601 "
        "duration> before now.",
        validator=SHARE_AUTO_OFFSET_RESET,
    )  # fmt: skip
    share_isolation_level: str = setting(
        "share.isolation.level", ConfigType.STRING, "read_uncommitted",
        "Share groups: read_committed delivers only committed transactional records; "
        "read_uncommitted delivers aborted ones too.",
        validator=one_of("read_committed", "read_uncommitted"),
    )  # fmt: skip
    streams_session_timeout_ms: int = setting(
        "streams.session.timeout.ms", ConfigType.INT, 45000,
        "Streams groups: how long a member may go without a heartbeat.",
        validator=at_least(1), synonyms=_from("group.streams.session.timeout.ms"),
    )  # fmt: skip
    streams_heartbeat_interval_ms: int = setting(
        "streams.heartbeat.interval.ms", ConfigType.INT, 5000,
        "Streams groups: the heartbeat interval given to members.",
        validator=at_least(1), synonyms=_from("group.streams.heartbeat.interval.ms"),
    )  # fmt: skip
    streams_num_standby_replicas: int = setting(
        "streams.num.standby.replicas", ConfigType.INT, 0,
        "Streams groups: standby replicas of each task.",
        validator=at_least(0), synonyms=_from("group.streams.num.standby.replicas"),
    )  # fmt: skip


GROUP_KEYS: Mapping[str, ConfigKey] = keys_of(GroupConfig)

BOUNDS: Mapping[str, tuple[str | None, str]] = {
    "consumer.heartbeat.interval.ms": (
        "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    "consumer.session.timeout.ms": (
        "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": (
        "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": (
        "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.record.lock.duration.ms": (
        "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    "streams.heartbeat.interval.ms": (
        "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    "streams.session.timeout.ms": (
        "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    "streams.num.standby.replicas": (None, "group.streams.max.standby.replicas"),
}  # fmt: skip
"""Per group key, the broker keys bounding it (min, max), in the order Kafka checks them."""

SESSION_OVER_HEARTBEAT = tuple(
    (f"{p}.session.timeout.ms", f"{p}.heartbeat.interval.ms")
    for p in ("consumer", "share", "streams")
)
"""Each protocol's session timeout must exceed its heartbeat interval."""


def group_defaults(broker: BrokerConfig) -> dict[str, ConfigValue]:
    """Every group key's default on this broker: its broker key's value, else Kafka's."""
    return {
        name: broker.get(spec.synonyms[0].name) if spec.synonyms else spec.default
        for name, spec in GROUP_KEYS.items()
    }


def validate_group_overrides(
    overrides: Mapping[str, str | None], broker: BrokerConfig
) -> dict[str, ConfigValue]:
    """Check a group's whole new override set over the broker's defaults, as Kafka's
    controller does; ConfigError (-> INVALID_CONFIG) says what is wrong. Returns the parsed
    overrides."""
    parsed: dict[str, ConfigValue] = {}
    for key, raw in overrides.items():
        spec = GROUP_KEYS.get(key)
        if spec is None:
            raise ConfigError(key, f"Unknown group config name: {key}")
        if raw is None:
            raise ConfigError(key, f"Null value not supported for group configs: {key}")
        value = parse_value(key, spec.type, raw)
        spec.check(value)
        parsed[key] = value
    values: dict[str, Any] = {**group_defaults(broker), **parsed}
    for key, (low_key, high_key) in BOUNDS.items():
        if low_key is not None and values[key] < broker.get(low_key):
            raise ConfigError(key, f"{key} must be greater than or equal to {low_key}", values[key])
        if values[key] > broker.get(high_key):
            raise ConfigError(key, f"{key} must be less than or equal to {high_key}", values[key])
    for session, heartbeat in SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise ConfigError(session, f"{session} must be greater than {heartbeat}")
    return parsed


def describe_group_config(
    broker: BrokerConfig,
    overrides: Mapping[str, str],
    keys: Iterable[str] | None = None,
    include_synonyms: bool = True,
) -> list[ConfigEntry]:
    """DescribeConfigs entries for a group (known or not), sorted by name; unknown requested
    keys are skipped. Kafka's synonym chain is the key itself with the value's source."""
    defaults = group_defaults(broker)
    wanted = sorted(GROUP_KEYS) if keys is None else sorted(k for k in set(keys) if k in GROUP_KEYS)
    entries = []
    for name in wanted:
        spec = GROUP_KEYS[name]
        stored = overrides.get(name)
        if stored is not None:
            value, source = (
                to_string(parse_value(name, spec.type, stored)),
                ConfigSource.GROUP_CONFIG,
            )
        else:
            value, source = to_string(defaults[name]), ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                config_type=spec.type,
                read_only=False,
                is_sensitive=False,
                synonyms=(ConfigSynonym(name, value, source),) if include_synonyms else (),
                documentation=spec.doc,
            )
        )
    return entries
