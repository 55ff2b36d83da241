"""AlterClientQuotas (API 49): client quotas into the metadata log (ClientQuotaRecord).

Entities are Kafka's: `user` and/or `client-id` (a name, or null for the default), or `ip`
alone; each type at most once. Per entity, as Kafka's ClientQuotaControlManager checks: an
unknown or repeated entity type, `ip` with another type, an unknown key, a key given twice, or
a value that is not a positive number (or a fraction for the byte rates, which Kafka types as
longs) is INVALID_REQUEST with the reason; nothing of that entity is written. `user` and
`client-id` entities take `producer_byte_rate`, `consumer_byte_rate`, `request_percentage` and
`controller_mutation_rate` (`strom.broker.security.quotas`); an `ip` entity (an IP address, or
null for the default) takes `connection_creation_rate` alone, a whole number of connections per
second (KIP-612, `IpConnectionQuotas`). An ip name that is not an IP address literal is
INVALID_REQUEST: Kafka also resolves host names there, but the controller does no DNS.
"""

from __future__ import annotations

import ipaddress
import math
from collections import Counter

from strom.config.values import INT_MAX
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
IP_KEYS = ("connection_creation_rate",)
"""The keys of an ip entity (Kafka's QuotaConfig.ipConfigs), typed as ints."""


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
    for kind, name in entity:
        if kind == "ip" and name is not None and not is_ip_address(name):
            return f"{name} is not a valid IP address"
    return None


def is_ip_address(name: str) -> bool:
    """An IPv4 or IPv6 address literal (what an ip quota entity names)."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


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
        if op.key not in ENFORCED and op.key not in IP_KEYS:
            return f"Unknown quota key {op.key}"
        is_ip = any(kind == "ip" for kind, _ in entity)
        if is_ip and op.key not in IP_KEYS:
            return f"Quota key {op.key} does not apply to an ip entity"
        if not is_ip and op.key in IP_KEYS:
            return f"Quota key {op.key} applies to an ip entity only"
        if not op.remove and (not math.isfinite(op.value) or op.value <= 0):
            return f"Illegal value {op.value} for quota key {op.key}: a positive number is needed"
        if not op.remove and op.key in IP_KEYS and op.value > INT_MAX:
            return f"Proposed value for {op.key} is too large for an INT."
        if not op.remove and op.key in WHOLE + IP_KEYS and abs(op.value % 1.0) > 1e-6:
            return f"{op.key} cannot be a fractional value."
    return None
