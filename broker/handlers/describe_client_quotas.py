"""DescribeClientQuotas (key 48): the client quotas in force, filtered.

Behavior:
- Strom enforces no client quotas yet and does not serve AlterClientQuotas (a quota it could
  not enforce is never accepted: clients setting one get UNSUPPORTED_VERSION), so no quota
  exists and every filter matches nothing: an empty answer, which is the truth. This lets
  `kafka-configs --describe --entity-type users` show a user's SCRAM credentials.
- Filters are still checked as Kafka checks them: entity types `user`, `client-id`, `ip`,
  each at most once; match type 0 (exact) needs a name, 1 (default) and 2 (any) take none; an
  `ip` cannot combine with the others. Else INVALID_REQUEST with the reason.
- With an authorizer: DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Version notes: v1 is flexible.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1

ENTITY_TYPES = ("user", "client-id", "ip")
EXACT, DEFAULT, ANY = 0, 1, 2


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not allowed(broker, request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            entries=None)  # fmt: skip
    reason = _invalid(body.components)
    if reason is not None:
        return DescribeClientQuotasResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message=reason, entries=None
        )
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, entries=[])


def _invalid(components: list[DescribeClientQuotasRequest.ComponentData]) -> str | None:
    counts = Counter(c.entity_type for c in components)
    for component in components:
        if component.entity_type not in ENTITY_TYPES:
            return f"Custom entity type {component.entity_type!r} not supported"
        if counts[component.entity_type] > 1:
            return f"Duplicate {component.entity_type} filter component entity type"
        if component.match_type == EXACT and component.match is None:
            return "Unexpected null match string for exact match"
        if component.match_type in (DEFAULT, ANY) and component.match is not None:
            return "Unexpected match string for default or any match"
        if component.match_type not in (EXACT, DEFAULT, ANY):
            return f"Unknown match type {component.match_type}"
    if "ip" in counts and len(counts) > 1:
        return "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component."
    return None
