"""DescribeClientQuotas (key 48): the client quotas in force, filtered.

Behavior:
- Answered from this broker's metadata image (ClientQuotaRecord, set with
  AlterClientQuotas): every entity the filter matches, with its values. A component matches
  an entity that has its type with the exact name (match type 0), the default (1, name null)
  or any name (2); `strict` also drops entities with types the filter does not name.
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
    entries = []
    for entity, values in sorted(broker.image.client_quotas.items(), key=lambda kv: str(kv[0])):
        if _matches(entity, body.components, body.strict):
            entries.append(DescribeClientQuotasResponse.EntryData(
                [DescribeClientQuotasResponse.EntityData(k, n) for k, n in entity],
                [DescribeClientQuotasResponse.ValueData(k, v) for k, v in sorted(values.items())],
            ))  # fmt: skip
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, entries=entries)


def _matches(
    entity: tuple[tuple[str, str | None], ...],
    components: list[DescribeClientQuotasRequest.ComponentData],
    strict: bool,
) -> bool:
    names = dict(entity)
    for c in components:
        if c.entity_type not in names:
            return False
        name = names[c.entity_type]
        if c.match_type == EXACT and name != c.match:
            return False
        if c.match_type == DEFAULT and name is not None:
            return False
        if c.match_type == ANY and name is None:
            return False
    return not strict or set(names) <= {c.entity_type for c in components}


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
