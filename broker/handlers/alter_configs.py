"""AlterConfigs (key 33), the deprecated whole-resource replacement.

Behavior:
- Each TOPIC, BROKER or GROUP resource's override set is replaced by the keys given:
  keys left out are deleted. The controller (`QuorumController.alter_configs`)
  checks it as Kafka does (see IncrementalAlterConfigs for the error cases);
  a change takes effect without a restart (`strom.broker.replication.partitions` pushes topic
  configs into the partition logs on every publish).
- BROKER_LOGGER and any other type Kafka does not forward are INVALID_REQUEST
  "Unknown resource type N", answered here (see `strom.broker.admin.alter_preprocess`); results
  come back in request order. On a broker that is not the active controller the other
  resources go to the active controller (see `strom.broker.admin.forwarding`). `validate_only` changes nothing.

Version notes: v0-v1 identical; v2 is flexible.
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
from strom.config.alter_ops import AlterOp
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(
    broker: BrokerState, request: RequestContext, body: AlterConfigsRequest
) -> AlterConfigsResponse:
    resources = body.resources
    local = preprocess(
        resources,
        [[(c.name, AlterOp.SET, c.value) for c in r.configs] for r in resources],
        node_id=broker.node_id,
        incremental=False,
        validate_only=body.validate_only,
        check_own_broker=partial(tls_change_refusal, broker),
        authorize=partial(config_refusal, broker, request, AclOperation.ALTER_CONFIGS),
    )
    forwarded = [r for r, outcome in zip(resources, local, strict=True) if outcome is None]
    answered: list[AlterConfigsResponse.AlterConfigsResourceResponse] = []
    if forwarded:
        to_controller = AlterConfigsRequest(resources=forwarded, validate_only=body.validate_only)
        if not broker.controller.is_active:
            response = await forward(broker, request, to_controller, AlterConfigsResponse)
        else:
            response = await broker.controller.alter_configs(to_controller, request.api_version)
        answered = response.responses
    return AlterConfigsResponse(
        responses=merge(
            resources, local, answered, AlterConfigsResponse.AlterConfigsResourceResponse
        )
    )
