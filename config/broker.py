"""`BrokerConfig`: the typed, validated, immutable broker configuration.

Attributes are Kafka's keys with dots as underscores (`log.retention.hours` ->
`log_retention_hours`) holding the configured value, so DescribeConfigs can
report exactly what was set; the properties below derive the effective values
Kafka computes from them (retention ms > minutes > hours, log.dirs > log.dir, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from strom.config.checks import check_cross_key_rules
from strom.config.coordinators import CoordinatorSettings
from strom.config.errors import ConfigError
from strom.config.ignored import is_ignored
from strom.config.keys import attr_name, check_fields, keys_of
from strom.config.listeners import (
    Listener,
    parse_listener_names,
    parse_listeners,
    parse_protocol_map,
    split_list,
)
from strom.config.logs import LogSettings
from strom.config.properties import apply_overrides, read_properties_file
from strom.config.records import RecordSettings
from strom.config.server import DEFAULT_PROTOCOL_MAP, ServerSettings
from strom.config.values import ConfigValue, parse_value

STROM_DEFAULTS: Mapping[str, str] = {
    "node.id": "Kafka has no default (required); Strom's embedded node is 1",
    "process.roles": "Kafka has no default (required); Strom is always a combined node",
    "listeners": "Kafka binds PLAINTEXT://:9092 (all interfaces); Strom binds loopback",
    "log.dir": "Kafka uses /tmp/kafka-logs; Strom uses ./data",
    "offsets.topic.replication.factor": "Kafka's built-in 3 needs 3 brokers; 1 as in server.properties",
    "transaction.state.log.replication.factor": "as offsets.topic.replication.factor",
    "transaction.state.log.min.isr": "Kafka's built-in 2; 1 as in Kafka's shipped server.properties",
}
"""Where Strom's defaults deliberately differ from Kafka's, and why."""

_PY_LEVELS = {"TRACE": 5, "WARN": logging.WARNING, "FATAL": logging.CRITICAL}
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


@dataclass(frozen=True)
class BrokerConfig(ServerSettings, LogSettings, RecordSettings, CoordinatorSettings):
    """The broker configuration; construction validates every value and cross-key rule.

    The mixins only declare fields; `__init__`, `__repr__` and `__eq__` are generated here
    once rather than for each mixin too (a few ms of every start-up).
    """

    explicit_keys: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """Keys set in the file or overrides (DescribeConfigs reports them as STATIC_BROKER_CONFIG)."""
    ignored_settings: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    """Accepted-but-unused Kafka keys, verbatim, in the order given."""

    def __post_init__(self) -> None:
        check_fields(self)
        check_cross_key_rules(self)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Build from string properties, as read from a file plus overrides."""
        values: dict[str, Any] = {}
        ignored: list[tuple[str, str]] = []
        for key, raw in props.items():
            spec = BROKER_KEYS.get(key)
            if spec is not None:
                values[spec.attr] = parse_value(key, spec.type, raw)
            elif is_ignored(key):
                ignored.append((key, raw))
            else:
                raise ConfigError.unknown(key)
        explicit = frozenset(key for key in props if key in BROKER_KEYS)
        return cls(**values, explicit_keys=explicit, ignored_settings=tuple(ignored))

    def get(self, key: str) -> ConfigValue:
        """The configured value of a Kafka key (None if unset and without default)."""
        if key not in BROKER_KEYS:
            raise ConfigError.unknown(key)
        value: ConfigValue = getattr(self, attr_name(key))
        return value

    def is_explicit(self, key: str) -> bool:
        """Whether the key was configured rather than left at its default."""
        return key in self.explicit_keys or self.get(key) != BROKER_KEYS[key].default

    @cached_property
    def roles(self) -> frozenset[str]:
        """process.roles as a set."""
        return frozenset(self.process_roles)

    @cached_property
    def data_dirs(self) -> tuple[str, ...]:
        """The effective data directories: log.dirs if set, else log.dir."""
        if self.log_dirs is not None and self.log_dirs.strip():
            return tuple(split_list(self.log_dirs))
        return (self.log_dir,)

    @cached_property
    def metadata_dir(self) -> str:
        """metadata.log.dir, defaulting to the first data directory as in Kafka."""
        return self.metadata_log_dir or self.data_dirs[0]

    @cached_property
    def retention_ms(self) -> int:
        """Effective log retention: log.retention.ms > minutes > hours; any negative is -1."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * _MINUTE_MS
        else:
            millis = self.log_retention_hours * _HOUR_MS
        return -1 if millis < 0 else millis

    @cached_property
    def roll_ms(self) -> int:
        """Effective segment roll age: log.roll.ms > log.roll.hours."""
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * _HOUR_MS

    @cached_property
    def roll_jitter_ms(self) -> int:
        """Effective roll jitter: log.roll.jitter.ms > log.roll.jitter.hours."""
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * _HOUR_MS

    @cached_property
    def flush_interval_ms(self) -> int:
        """Effective flush interval: log.flush.interval.ms > log.flush.scheduler.interval.ms."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @cached_property
    def offsets_retention_ms(self) -> int:
        """offsets.retention.minutes in milliseconds."""
        return self.offsets_retention_minutes * _MINUTE_MS

    @cached_property
    def python_log_level(self) -> int:
        """strom.log.level as a `logging` level number (TRACE is 5)."""
        name = self.strom_log_level.upper()
        return _PY_LEVELS.get(name) or logging.getLevelNamesMapping()[name]

    @cached_property
    def listener_endpoints(self) -> tuple[Listener, ...]:
        """The listeners to bind, in configured order."""
        return tuple(parse_listeners(self.listeners, "listeners"))

    @cached_property
    def controller_listeners(self) -> tuple[str, ...]:
        """controller.listener.names, upper-cased."""
        names = self.controller_listener_names or ""
        return tuple(parse_listener_names(names, "controller.listener.names"))

    @cached_property
    def advertised_endpoints(self) -> tuple[Listener, ...]:
        """What clients are told: advertised.listeners, else the non-controller listeners.

        An empty host or port 0 here is for the server to fill in (its hostname, the bound port).
        """
        if self.advertised_listeners is not None and self.advertised_listeners.strip():
            return tuple(parse_listeners(self.advertised_listeners, "advertised.listeners"))
        return tuple(e for e in self.listener_endpoints if e.name not in self.controller_listeners)

    @cached_property
    def protocol_map(self) -> Mapping[str, str]:
        """Listener name -> security protocol; unmapped controller listeners are PLAINTEXT
        when the map is left at its default, as Kafka does in KRaft mode."""
        mapping = parse_protocol_map(self.listener_security_protocol_map)
        if self.listener_security_protocol_map == DEFAULT_PROTOCOL_MAP:
            for name in self.controller_listeners:
                mapping.setdefault(name, "PLAINTEXT")
        return mapping

    @cached_property
    def inter_broker_listener(self) -> str:
        """inter.broker.listener.name, else the listener named after
        security.inter.broker.protocol, else (Strom's leniency) the first advertised one."""
        if self.inter_broker_listener_name is not None:
            return self.inter_broker_listener_name.strip().upper()
        names = [e.name for e in self.advertised_endpoints]
        wanted = self.security_inter_broker_protocol
        return wanted if wanted in names or not names else names[0]

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of a listener (names are case-insensitive)."""
        return self.protocol_map[listener_name.upper()]


BROKER_KEYS = keys_of(BrokerConfig)
"""Every broker key Strom types, by Kafka name."""


def load_config(
    path: str | None = None,
    overrides: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Load like kafka-server-start: a properties file, then `key=value` overrides on top.

    `extra` (e.g. from tests or embedding code) is applied before the overrides.
    """
    props = read_properties_file(path) if path is not None else {}
    props.update(extra or {})
    return BrokerConfig.from_properties(apply_overrides(props, overrides))
