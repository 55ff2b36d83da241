"""Dynamic broker configs: how stored overrides change a running broker's configuration.

Kafka keeps dynamic broker configs as ConfigRecords on resource type BROKER,
name "" (the cluster-wide default) or a node id (that node only, which wins).
Only keys Kafka can change at runtime take effect; unknown keys are stored as
Kafka stores them but change nothing. A change is vetted by building the whole
resulting configuration, cross-key rules included. Where the overrides are
stored (the metadata image) is the coordinator's business; this module takes
them as plain mappings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

from strom.config.broker import BROKER_KEYS, BrokerConfig
from strom.config.config_error import ConfigError
from strom.config.security import parse_listener_settings, split_listener_key
from strom.config.values import parse_value

PER_BROKER_ONLY = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})
"""Keys Kafka accepts only for one named broker, never as a cluster default."""
PER_BROKER_PREFIXES = ("listener.name.", "ssl.")
"""Kafka's per-broker security configs: a key store belongs to one broker."""


def overlay(static: BrokerConfig, overrides: Mapping[str, str]) -> BrokerConfig:
    """`static` with the dynamic `overrides` that Strom applies; ConfigError if invalid.

    Listener-prefixed security keys (`listener.name.<l>.ssl.keystore.location`) apply when
    their base key is dynamic, over the file's prefixed values."""
    values: dict[str, Any] = {}
    for key, raw in overrides.items():
        spec = BROKER_KEYS.get(key)
        if spec is not None and spec.dynamic:
            values[spec.attr] = parse_value(key, spec.type, raw)
    names = [e.name for e in static.listener_endpoints]
    prefixed = {
        key: raw
        for key, raw in overrides.items()
        if (split := split_listener_key(key, names)) is not None
        and split.key in BROKER_KEYS
        and BROKER_KEYS[split.key].dynamic
    }
    if prefixed:
        parsed = parse_listener_settings(prefixed, BROKER_KEYS, names)
        merged = {**static.listener_settings_map, **parsed}
        values["listener_settings"] = tuple(sorted(merged.items()))
    return dataclasses.replace(static, **values) if values else static


class BrokerLayers(NamedTuple):
    """One node's configuration as its layers: the static file and the stored dynamic overrides.

    `per_broker` and `cluster_default` are the raw stored strings of the node's
    own resource and of the cluster-wide default; the node's own win.
    """

    static: BrokerConfig
    per_broker: Mapping[str, str]
    cluster_default: Mapping[str, str]

    def effective(self) -> BrokerConfig:
        """The configuration the node runs with; stored values that no longer validate are
        ignored (the static config is used) rather than failing."""
        if not self.per_broker and not self.cluster_default:
            return self.static
        try:
            return overlay(self.static, {**self.cluster_default, **self.per_broker})
        except ConfigError:
            return self.static

    def refusal(self, new: Mapping[str, str], *, per_broker: bool) -> str | None:
        """Why replacing the node's own (`per_broker`) or the cluster default overrides with
        `new` is refused, or None. Kafka answers these with INVALID_REQUEST (its KAFKA-13609
        caveat)."""
        names = [e.name for e in self.static.listener_endpoints]
        fixed = sorted(k for k in new if k in BROKER_KEYS and not BROKER_KEYS[k].dynamic)
        fixed += sorted(
            k
            for k in new
            if (split := split_listener_key(k, names)) is not None
            and split.key in BROKER_KEYS
            and not BROKER_KEYS[split.key].dynamic
        )
        if fixed:
            return f"Cannot update these configs dynamically: Set({', '.join(fixed)})"
        if not per_broker:
            scoped = sorted(
                k for k in new if k in PER_BROKER_ONLY or k.startswith(PER_BROKER_PREFIXES)
            )
            if scoped:
                return (
                    "Cannot update these configs at default cluster level, broker id must be "
                    f"specified: Set({', '.join(scoped)})"
                )
        if per_broker:
            merged = {**self.cluster_default, **new}
        else:
            merged = {**new, **self.per_broker}
        try:
            overlay(self.static, merged)
        except ConfigError as exc:
            return str(exc)
        return None
