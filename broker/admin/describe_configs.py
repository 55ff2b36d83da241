"""DescribeConfigs entries for TOPIC and BROKER resources, as Kafka's ConfigHelper builds them.

- TOPIC: an illegal name is INVALID_TOPIC_EXCEPTION, a missing topic
  UNKNOWN_TOPIC_OR_PARTITION (without a message); otherwise every topic key,
  resolved from the topic's overrides over the broker's effective config.
- BROKER "<node id>": every broker key with its effective value (static file,
  then dynamic cluster default, then dynamic per-broker override) and the
  synonym chain that produced it; dynamic keys Strom does not know are shown as
  Kafka shows them: type UNKNOWN, sensitive (value null), read-only.
- BROKER "": only the stored cluster-wide dynamic defaults, each with just its
  DYNAMIC_DEFAULT_BROKER_CONFIG synonyms (Kafka's "default" resource).
- Another node id is INVALID_REQUEST "Unexpected broker id, expected 1 or empty
  string, ..."; a name that is not a number INVALID_REQUEST too.
Requested keys Strom does not know are left out, as Kafka does; an empty key
list means all keys, like null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from strom.config import BROKER_KEYS, BROKER_SYNONYMS, ConfigError, ConfigType
from strom.config.resolve import (
    BrokerLayers,
    ConfigEntry,
    ConfigSynonym,
    describe_broker_config,
    resolve_topic_config,
)
from strom.config.values import ConfigSource
from strom.coordinator.controller.dynamic import effective_config
from strom.coordinator.controller.names import invalid_topic_name
from strom.coordinator.metadata.image import BROKER_RESOURCE
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.state import BrokerState
    from strom.config import BrokerConfig


class ResourceError(Exception):
    """One config resource's failure: a Kafka error code and its message ('' when Kafka sends none)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def broker_layers(state: BrokerState) -> tuple[BrokerConfig, BrokerLayers]:
    """This node's effective configuration and where its dynamic values come from."""
    image = state.image
    layers = BrokerLayers(
        state.config,
        image.config_overrides(BROKER_RESOURCE, str(state.node_id)),
        image.config_overrides(BROKER_RESOURCE, ""),
    )
    return effective_config(state.config, image, state.node_id), layers


def wanted_keys(keys: list[str] | None) -> list[str] | None:
    """Kafka lists every key for a null or an empty key list."""
    return keys or None


def describe_topic(
    state: BrokerState, name: str, keys: list[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    reason = invalid_topic_name(name)
    if reason is not None:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    image = state.image
    if image.topic(name) is None:
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    effective, layers = broker_layers(state)
    try:
        return resolve_topic_config(
            effective,
            image.topic_config_overrides(name),
            wanted_keys(keys),
            include_synonyms,
            layers,
        )
    except ConfigError as exc:  # stored overrides the controller once accepted no longer resolve
        raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc


def describe_broker(
    state: BrokerState, name: str, keys: list[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    if not name:
        return _cluster_defaults(state, wanted_keys(keys), include_synonyms)
    if node_id_of(name) != state.node_id:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {state.node_id} or empty string, but received {name}",
        )
    effective, layers = broker_layers(state)
    wanted = wanted_keys(keys)
    entries = describe_broker_config(effective, wanted, include_synonyms, layers)
    stored = {**layers.cluster_default, **layers.per_broker}
    unknown = sorted(k for k in stored if k not in BROKER_KEYS and _selected(k, wanted))
    for key in unknown:
        chain = [
            ConfigSynonym(key, None, source)
            for overrides, source in (
                (layers.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (layers.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            )
            if key in overrides
        ]
        entries.append(_unknown_entry(key, chain, include_synonyms))
    return sorted(entries, key=lambda e: e.name)


def node_id_of(name: str) -> int:
    """A BROKER resource name as a node id; INVALID_REQUEST when it is not a number."""
    try:
        return int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None


def _selected(key: str, wanted: Iterable[str] | None) -> bool:
    return wanted is None or key in wanted


def _cluster_defaults(
    state: BrokerState, wanted: list[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    """Kafka's BROKER "" resource: the dynamic defaults alone, with their raw stored values."""
    defaults: Mapping[str, str] = state.image.config_overrides(BROKER_RESOURCE, "")
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    entries = []
    for key in sorted(k for k in defaults if _selected(k, wanted)):
        spec = BROKER_KEYS.get(key)
        if spec is None:
            entries.append(
                _unknown_entry(key, [ConfigSynonym(key, None, source)], include_synonyms)
            )
            continue
        hidden = spec.sensitive
        names = BROKER_SYNONYMS.get(key, (key,))
        chain = [
            ConfigSynonym(n, None if hidden else defaults[n], source)
            for n in names
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


def _unknown_entry(key: str, chain: list[ConfigSynonym], include_synonyms: bool) -> ConfigEntry:
    """A key Kafka has no type for: treated as sensitive, never dynamic."""
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
