"""DescribeConfigs (key 32).

Behavior:
- TOPIC (2) and BROKER (4) resources as Kafka's ConfigHelper answers them (see
  `strom.broker.admin.describe_resources`): topic values are the topic's overrides over the
  broker's effective config, with their source and synonym chain; BROKER
  "<this node's id>" lists every broker key, BROKER "" only the dynamic
  cluster-wide defaults; dynamic broker configs from the metadata image show
  as DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG.
- BROKER_LOGGER (8) "<this node's id>" lists every logger with its current
  level (see `strom.broker.admin.loggers`).
- GROUP (32) "<group id>": KIP-848's group configs, the stored override (GROUP_CONFIG) or
  the broker's default (DEFAULT_CONFIG), for any group id; DESCRIBE_CONFIGS on the group.
- Per-resource errors: an unknown topic UNKNOWN_TOPIC_OR_PARTITION (no
  message), an illegal topic name INVALID_TOPIC_EXCEPTION, another broker id
  INVALID_REQUEST "Unexpected broker id, ...", an empty group id INVALID_REQUEST.
  CLIENT_METRICS (16) is a type Kafka knows and Strom does not keep: INVALID_REQUEST for
  that resource. Any other resource type fails the whole request as in Kafka:
  every resource INVALID_REQUEST with Kafka's default message.
- `configuration_keys` null or empty means every key; unknown keys are skipped.
  Sensitive values are null; `include_synonyms` (v1+) and
  `include_documentation` (v3+) add what they name.

Version notes: v1 is the oldest Kafka 4.0 serves (source, synonyms); v2 the
same; v3 adds config types and documentation; v4 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin import describe_resources
from strom.broker.admin import loggers as admin_loggers
from strom.broker.admin.alter_preprocess import config_refusal
from strom.broker.admin.describe_resources import ResourceError
from strom.config.values import ConfigResource
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState
    from strom.config.resolve import ConfigEntry

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

KNOWN_TYPES = frozenset(ConfigResource) - {ConfigResource.UNKNOWN}
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)
"""Kafka's default message for INVALID_REQUEST, sent when the whole request fails."""

Resource = DescribeConfigsRequest.DescribeConfigsResource
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    if any(r.resource_type not in KNOWN_TYPES for r in body.resources):
        return DescribeConfigsResponse(
            results=[
                Result(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=INVALID_REQUEST_MESSAGE,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in body.resources
            ]
        )
    results = []
    for r in body.resources:
        refused = config_refusal(
            broker, request, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name
        )
        if refused is None:
            results.append(_describe(broker, r, body))
        else:
            results.append(Result(error_code=refused.code, error_message=refused.message,
                                  resource_type=r.resource_type, resource_name=r.resource_name))  # fmt: skip
    return DescribeConfigsResponse(results=results)


def _describe(broker: BrokerState, resource: Resource, body: DescribeConfigsRequest) -> Result:
    name, keys, synonyms = (
        resource.resource_name,
        resource.configuration_keys,
        body.include_synonyms,
    )
    try:
        if resource.resource_type == ConfigResource.TOPIC:
            entries = describe_resources.describe_topic(broker, name, keys, synonyms)
        elif resource.resource_type == ConfigResource.BROKER:
            entries = describe_resources.describe_broker(broker, name, keys, synonyms)
        elif resource.resource_type == ConfigResource.GROUP:
            entries = describe_resources.describe_group(broker, name, keys, synonyms)
        elif resource.resource_type == ConfigResource.BROKER_LOGGER:
            admin_loggers.check_node(name, broker.node_id, describing=True)
            entries = admin_loggers.describe(keys)
        else:
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"Strom keeps no configs for resource type {resource.resource_type}",
            )
    except ResourceError as exc:
        return Result(
            error_code=exc.code,
            error_message=exc.message,
            resource_type=resource.resource_type,
            resource_name=name,
        )
    loggers = resource.resource_type == ConfigResource.BROKER_LOGGER
    return Result(
        resource_type=resource.resource_type,
        resource_name=name,
        configs=[
            # Kafka never sets a logger entry's documentation, so it keeps the schema default "".
            _entry(e, "" if loggers else _documentation(e, body.include_documentation))
            for e in entries
        ],
    )


def _documentation(entry: ConfigEntry, include_documentation: bool) -> str | None:
    return (entry.documentation or None) if include_documentation else None


def _entry(entry: ConfigEntry, documentation: str | None) -> Entry:
    return Entry(
        name=entry.name,
        value=None if entry.is_sensitive else entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.is_sensitive,
        synonyms=[Synonym(s.name, s.value, int(s.source)) for s in entry.synonyms],
        config_type=int(entry.config_type),
        documentation=documentation,
    )
