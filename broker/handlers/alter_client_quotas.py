"""AlterClientQuotas (key 49): set or remove client quotas.

Behavior:
- ALTER_CONFIGS on the cluster is needed (else every entry CLUSTER_AUTHORIZATION_FAILED).
- The controller checks each entity and its operations and writes ClientQuotaRecords
  (`strom.coordinator.controller.quota_commands`): INVALID_REQUEST with the reason for an
  entity Kafka refuses (an ip that is not an address), an unknown key or one that does not
  fit the entity (an ip takes connection_creation_rate alone), a non-positive value or a
  fraction of an integer key.
- The quotas apply on every broker as soon as its image holds them
  (`strom.broker.security.quotas`; an ip's connection_creation_rate in the acceptor,
  `strom.broker.network.server`). `validate_only` writes nothing.
- On a broker that is not the active controller the request goes to the active controller.

Version notes: v1 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    if not allowed(broker, request, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
        return AlterClientQuotasResponse(entries=[
            AlterClientQuotasResponse.EntryData(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None,
                [AlterClientQuotasResponse.EntityData(e.entity_type, e.entity_name)
                 for e in entry.entity],
            )
            for entry in body.entries
        ])  # fmt: skip
    if not broker.controller.is_active:
        return await forward(broker, request, body, AlterClientQuotasResponse)
    return await broker.controller.alter_client_quotas(body, request.api_version)
