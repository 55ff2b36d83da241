"""Dynamic broker configs: overlay them on the static config, and vet changes.

Kafka keeps dynamic broker configs as ConfigRecords on resource type BROKER,
name "" (cluster-wide default) or the node id (that node only, which wins).
Only keys Kafka can change at runtime take effect; unknown keys are stored
as Kafka stores them but change nothing. A change is vetted by building the
whole resulting configuration, cross-key rules included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from strom.config import BROKER_KEYS, BrokerConfig, ConfigEntry, ConfigError, ConfigSource
from strom.config.values import parse_value
from strom.coordinator.metadata.image import BROKER_RESOURCE, MetadataImage

PER_BROKER_ONLY = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})
"""Keys Kafka accepts only for one named broker, never as a cluster default."""
PER_BROKER_PREFIXES = ("listener.name.",)


def overlay(static: BrokerConfig, overrides: Mapping[str, str]) -> BrokerConfig:
    """`static` with the dynamic `overrides` that Strom applies; ConfigError if invalid."""
    values: dict[str, Any] = {}
    for key, raw in overrides.items():
        spec = BROKER_KEYS.get(key)
        if spec is not None and spec.dynamic:
            values[spec.attr] = parse_value(key, spec.type, raw)
    return dataclasses.replace(static, **values) if values else static


def effective_config(static: BrokerConfig, image: MetadataImage, node_id: int) -> BrokerConfig:
    """The configuration node `node_id` runs with; stored values that no longer
    validate are ignored (the static config is used) rather than failing."""
    overrides = image.broker_config_overrides(node_id)
    if not overrides:
        return static
    try:
        return overlay(static, overrides)
    except ConfigError:
        return static


def check_broker_change(
    static: BrokerConfig, image: MetadataImage, node_id: int, name: str, new: Mapping[str, str]
) -> str | None:
    """Why replacing broker resource `name`'s overrides with `new` is refused, or None.

    Kafka answers these with INVALID_REQUEST (its KAFKA-13609 caveat).
    """
    fixed = sorted(k for k in new if k in BROKER_KEYS and not BROKER_KEYS[k].dynamic)
    if fixed:
        return f"Cannot update these configs dynamically: Set({', '.join(fixed)})"
    if not name:
        scoped = sorted(k for k in new if k in PER_BROKER_ONLY or k.startswith(PER_BROKER_PREFIXES))
        if scoped:
            return (
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: Set({', '.join(scoped)})"
            )
    if name:
        merged = {**image.config_overrides(BROKER_RESOURCE, ""), **new}
    else:
        merged = {**new, **image.config_overrides(BROKER_RESOURCE, str(node_id))}
    try:
        overlay(static, merged)
    except ConfigError as exc:
        return str(exc)
    return None


def entry_source(entry: ConfigEntry, image: MetadataImage, node_id: int) -> ConfigSource:
    """An entry's source, telling dynamic broker values apart from static ones."""
    if entry.source is not ConfigSource.STATIC_BROKER_CONFIG or not entry.synonyms:
        return entry.source
    first = entry.synonyms[0].name
    if first in image.config_overrides(BROKER_RESOURCE, str(node_id)):
        return ConfigSource.DYNAMIC_BROKER_CONFIG
    if first in image.config_overrides(BROKER_RESOURCE, ""):
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return entry.source
