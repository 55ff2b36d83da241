"""Validation rules that span several broker keys.

Kept apart from the key definitions because each rule reads derived values
(parsed listeners, effective retention); every error names the key to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.config.errors import ConfigError

if TYPE_CHECKING:
    from strom.config.broker import BrokerConfig


def check_cross_key_rules(cfg: BrokerConfig) -> None:
    """Rules spanning several keys, each error naming the key to change."""
    if cfg.broker_id is not None and cfg.broker_id != cfg.node_id:
        raise ConfigError.invalid(
            "broker.id", cfg.broker_id, f"the same value as node.id ({cfg.node_id})"
        )
    _check_listeners(cfg)
    if not all(d.strip() for d in cfg.data_dirs):
        raise ConfigError.invalid("log.dirs", cfg.log_dirs, "non-empty comma-separated directories")
    if cfg.retention_ms == 0:
        key = next(
            k
            for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
            if cfg.get(k) is not None
        )
        raise ConfigError.invalid(key, 0, "-1 (unlimited) or a positive retention")
    if cfg.log_cleaner_min_compaction_lag_ms > cfg.log_cleaner_max_compaction_lag_ms:
        raise ConfigError.invalid(
            "log.cleaner.min.compaction.lag.ms",
            cfg.log_cleaner_min_compaction_lag_ms,
            "at most log.cleaner.max.compaction.lag.ms",
        )
    if "classic" not in cfg.group_coordinator_rebalance_protocols:
        raise ConfigError.invalid(
            "group.coordinator.rebalance.protocols",
            cfg.group_coordinator_rebalance_protocols,
            "a list including classic",
        )


def _check_listeners(cfg: BrokerConfig) -> None:
    """Kafka's listener rules, relaxed where a combined single process needs no quorum port."""
    endpoints = cfg.listener_endpoints
    names = {e.name for e in endpoints}
    if not endpoints:
        raise ConfigError.invalid("listeners", cfg.listeners, "at least one listener")
    bound = [(e.host, e.port) for e in endpoints if e.port != 0]
    if len(bound) != len(set(bound)):
        raise ConfigError.invalid("listeners", cfg.listeners, "a distinct host:port per listener")
    for name in names:
        if name not in cfg.protocol_map:
            raise ConfigError.invalid(
                "listener.security.protocol.map",
                cfg.listener_security_protocol_map,
                f"a security protocol for listener {name}",
            )
    controllers = set(cfg.controller_listeners)
    if controllers and "controller" in cfg.roles and not controllers & names:
        raise ConfigError.invalid(
            "controller.listener.names",
            cfg.controller_listener_names,
            "at least one name that appears in listeners",
        )
    if "controller" not in cfg.roles and controllers & names:
        raise ConfigError.invalid(
            "controller.listener.names",
            cfg.controller_listener_names,
            "no name that appears in listeners when process.roles is broker only",
        )
    _check_advertised(cfg, names, controllers)


def _check_advertised(cfg: BrokerConfig, names: set[str], controllers: set[str]) -> None:
    """Advertised endpoints must be routable, known listeners; the inter-broker one must exist."""
    advertised = cfg.advertised_endpoints
    for endpoint in advertised:
        if endpoint.name not in names:
            raise ConfigError.invalid(
                "advertised.listeners",
                cfg.advertised_listeners,
                f"listener names that appear in listeners ({endpoint.name} does not)",
            )
        if endpoint.host == "0.0.0.0":
            raise ConfigError.invalid(
                "advertised.listeners",
                cfg.advertised_listeners or cfg.listeners,
                "routable addresses, not the meta-address 0.0.0.0 "
                "(when unset it defaults to listeners)",
            )
    advertised_names = {e.name for e in advertised}
    if cfg.inter_broker_listener_name is None:
        wanted = cfg.security_inter_broker_protocol
        explicit = "security.inter.broker.protocol" in cfg.explicit_keys
        if explicit and "broker" in cfg.roles and wanted not in advertised_names:
            raise ConfigError.invalid(
                "security.inter.broker.protocol",
                wanted,
                "the name of a listener in advertised.listeners (or set inter.broker.listener.name)",
            )
        return
    if "security.inter.broker.protocol" in cfg.explicit_keys:
        raise ConfigError.invalid(
            "inter.broker.listener.name",
            cfg.inter_broker_listener_name,
            "to be unset when security.inter.broker.protocol is set (only one of them)",
        )
    name = cfg.inter_broker_listener
    if name in controllers or ("broker" in cfg.roles and name not in advertised_names):
        raise ConfigError.invalid(
            "inter.broker.listener.name",
            cfg.inter_broker_listener_name,
            "a non-controller listener name that appears in advertised.listeners",
        )
