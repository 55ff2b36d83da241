"""AlterClientQuotas (API 49): client quotas into the metadata log (ClientQuotaRecord).

Entities are Kafka's: `user` and/or `client-id` (a name, or null for the default), or `ip`
alone; each type at most once. Per entity, as Kafka's ClientQuotaControlManager checks: an
unknown or repeated entity type, `ip` with another type, an unknown key, a key given twice, or
a value that is not a positive number (or a fraction for the byte rates, which Kafka types as
longs) is INVALID_REQUEST with the reason; nothing of that entity is written. Strom enforces
`producer_byte_rate`, `consumer_byte_rate`, `request_percentage` and
`controller_mutation_rate` (`strom.broker.security.quotas`); `ip`'s `connection_creation_rate`
is refused with INVALID_REQUEST rather than stored and ignored.
"""

from __future__ import annotations

import math
from collections import Counter

from strom.coordinator.controller.result import Context, ControllerResult
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.client_quota_record import ClientQuotaRecord
from strom.wire.message import Message
from strom.wire.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)

ENTITY_TYPES = ("user", "client-id", "ip")
ENFORCED = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
"""The quota keys Strom enforces."""
WHOLE = ("producer_byte_rate", "consumer_byte_rate")
"""Keys Kafka types as longs: a fraction is refused."""
NOT_ENFORCED = ("connection_creation_rate",)
"""Kafka's other quota keys: refused until enforced (fail closed)."""


def entity_error(entity: list[tuple[str, str | None]]) -> str | None:
    """Why an entity is not one Kafka accepts, or None."""
    types = Counter(kind for kind, _ in entity)
    if not entity:
        return "Invalid empty client quota entity"
    for kind in types:
        if kind not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {kind}"
        if types[kind] > 1:
            return f"Duplicate {kind} entity type in the client quota entity"
    if "ip" in types and len(types) > 1:
        return "Invalid quota entity combination, IP entity should not be combined with User or ClientId entities."
    return None


def alter_client_quotas(
    ctx: Context, request: AlterClientQuotasRequest
) -> ControllerResult[AlterClientQuotasResponse]:
    records: list[Message] = []
    results = []
    for entry in request.entries:
        entity = [(e.entity_type, e.entity_name) for e in entry.entity]
        reason = entity_error(entity) or _ops_error(entry.ops, entity)
        results.append(AlterClientQuotasResponse.EntryData(
            ErrorCode.INVALID_REQUEST if reason else ErrorCode.NONE, reason,
            [AlterClientQuotasResponse.EntityData(k, n) for k, n in entity],
        ))  # fmt: skip
        if reason is None:
            records += [
                ClientQuotaRecord([ClientQuotaRecord.EntityData(k, n) for k, n in entity],
                                  op.key, op.value, op.remove)
                for op in entry.ops
            ]
    response = AlterClientQuotasResponse(entries=results)
    return ControllerResult(response, [] if request.validate_only else records)


def _ops_error(ops: list[AlterClientQuotasRequest.OpData], entity: list[tuple[str, str | None]]) -> str | None:
    keys = Counter(op.key for op in ops)
    for op in ops:
        if keys[op.key] > 1:
            return f"Duplicate quota key {op.key} not updating quota"
        if op.key in NOT_ENFORCED:
            return f"Strom does not enforce {op.key} yet; it is refused rather than ignored"
        if op.key not in ENFORCED:
            return f"Unknown quota key {op.key}"
        if any(kind == "ip" for kind, _ in entity):
            return f"Quota key {op.key} does not apply to an ip entity"
        if not op.remove and (not math.isfinite(op.value) or op.value <= 0):
            return f"Illegal value {op.value} for quota key {op.key}: a positive number is needed"
        if not op.remove and op.key in WHOLE and abs(op.value % 1.0) > 1e-6:
            return f"{op.key} cannot be a fractional value."
    return None
