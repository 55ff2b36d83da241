"""DescribeConfigs for TOPIC, BROKER and GROUP resources: which entries a resource gets, and its errors.

The entries themselves (values, sources, synonym chains, how unknown stored keys
are shown) come from `strom.config.resolve`; this module picks the resource and
answers Kafka's per-resource errors, as its ConfigHelper does:

- TOPIC: an illegal name is INVALID_TOPIC_EXCEPTION, a missing topic
  UNKNOWN_TOPIC_OR_PARTITION (without a message); otherwise every topic key,
  resolved from the topic's overrides over the broker's effective config.
- BROKER "<node id>": every broker key with its effective value and synonym
  chain (static file, dynamic cluster default, dynamic per-broker override),
  plus the stored dynamic keys Strom does not know.
- BROKER "": only the stored cluster-wide dynamic defaults (Kafka's "default" resource).
- GROUP "<group id>": every group config (`strom.config.group`), the group's stored override
  or this broker's default, for any group id (it need not exist, as in Kafka); the name ""
  is INVALID_REQUEST "Group name must not be empty".
- Another node id is INVALID_REQUEST "Unexpected broker id, expected 1 or empty
  string, ..."; a name that is not a number INVALID_REQUEST too.
Requested keys Strom does not know are left out, as Kafka does; an empty key
list means all keys, like null.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.config import ConfigError
from strom.config.group import describe_group_config
from strom.config.resolve import (
    ConfigEntry,
    describe_broker_config,
    describe_cluster_defaults,
    resolve_topic_config,
)
from strom.coordinator.controller.names import invalid_topic_name
from strom.coordinator.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore


class ResourceError(Exception):
    """One config resource's failure: a Kafka error code and its message ('' when Kafka sends none)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def wanted_keys(keys: list[str] | None) -> list[str] | None:
    """Kafka lists every key for a null or an empty key list."""
    return keys or None


def describe_topic(
    state: BrokerCore, name: str, keys: list[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    reason = invalid_topic_name(name)
    if reason is not None:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    image = state.image
    if image.topic(name) is None:
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    layers = image.broker_config_layers(state.config)
    try:
        return resolve_topic_config(
            layers.effective(),
            image.topic_config_overrides(name),
            wanted_keys(keys),
            include_synonyms,
            layers,
        )
    except ConfigError as exc:  # stored overrides the controller once accepted no longer resolve
        raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc


def describe_broker(
    state: BrokerCore, name: str, keys: list[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    if not name:
        defaults = state.image.config_overrides(BROKER_RESOURCE, "")
        return describe_cluster_defaults(defaults, wanted_keys(keys), include_synonyms)
    if node_id_of(name) != state.node_id:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {state.node_id} or empty string, but received {name}",
        )
    layers = state.image.broker_config_layers(state.config)
    return describe_broker_config(layers.effective(), wanted_keys(keys), include_synonyms, layers)


def describe_group(
    state: BrokerCore, name: str, keys: list[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    layers = state.image.broker_config_layers(state.config)
    try:
        return describe_group_config(
            layers.effective(),
            state.image.config_overrides(GROUP_RESOURCE, name),
            wanted_keys(keys),
            include_synonyms,
        )
    except ConfigError as exc:  # a stored value that no longer parses
        raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc


def node_id_of(name: str) -> int:
    """A BROKER resource name as a node id; INVALID_REQUEST when it is not a number."""
    try:
        return int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
