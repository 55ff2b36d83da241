"""IncrementalAlterConfigs (key 44).

Behavior:
- SET, DELETE, APPEND and SUBTRACT (LIST keys only) on TOPIC, BROKER and GROUP
  resources go to the controller (`QuorumController.incremental_alter_configs`),
  which checks them as Kafka's broker and controller do: a resource named twice
  fails both entries, duplicate keys or null values (except DELETE) are
  INVALID_REQUEST, unknown topic keys or bad values INVALID_CONFIG with the
  reason, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, broker resources ""
  (cluster default) or this node's id with dynamic keys only (else
  INVALID_REQUEST, as Kafka answers broker validation failures), group resources with a
  non-empty id, known group keys and values within the broker's bounds (else INVALID_CONFIG;
  ALTER_CONFIGS on the group). Group configs are stored for every broker and ignored by
  classic groups, as in Kafka.
- A stored change takes effect without a restart: `strom.broker.replication.partitions` pushes
  topic config changes into the partition logs on every publish.
- BROKER_LOGGER (8) resources are answered here, never stored, as in Kafka
  (see `strom.broker.admin.loggers`); other unknown resource types are
  INVALID_REQUEST "Unknown resource type N" (see `strom.broker.admin.alter_preprocess`).
- On a broker that is not the active controller, TOPIC, BROKER and GROUP resources go to the active
  controller (see `strom.broker.admin.forwarding`).
- Results come back in request order. `validate_only` checks everything and
  changes nothing.

Version notes: v0 as introduced in Kafka 2.3 (KIP-339); v1 is flexible.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from strom.broker.admin.alter_preprocess import (
    config_refusal,
    merge,
    preprocess,
    tls_change_refusal,
)
from strom.broker.admin.forwarding import forward
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    resources = body.resources
    local = preprocess(
        resources,
        [[(c.name, c.config_operation, c.value) for c in r.configs] for r in resources],
        node_id=broker.node_id,
        incremental=True,
        validate_only=body.validate_only,
        check_own_broker=partial(tls_change_refusal, broker),
        authorize=partial(config_refusal, broker, request, AclOperation.ALTER_CONFIGS),
    )
    forwarded = [r for r, outcome in zip(resources, local, strict=True) if outcome is None]
    answered: list[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse] = []
    if forwarded:
        to_controller = IncrementalAlterConfigsRequest(
            resources=forwarded, validate_only=body.validate_only
        )
        if not broker.controller.is_active:
            response = await forward(
                broker, request, to_controller, IncrementalAlterConfigsResponse
            )
        else:
            response = await broker.controller.incremental_alter_configs(
                to_controller, request.api_version
            )
        answered = response.responses
    return IncrementalAlterConfigsResponse(
        responses=merge(
            resources, local, answered, IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
        )
    )
