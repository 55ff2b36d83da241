"""IncrementalAlterConfigs (v0-1) and AlterConfigs (v0-2) on topic, broker and group resources.

Checks follow Kafka's broker pre-checks then its controller, per resource:
a resource named twice fails both entries ("Each resource must appear at
most once."), duplicate keys and null values (other than DELETE) are
INVALID_REQUEST; resource types other than TOPIC (2), BROKER (4) and GROUP (32) are
INVALID_REQUEST. Broker resources: name "" or this node's id, only dynamic
keys, validated as a whole configuration (failures are INVALID_REQUEST, as
in Kafka). Topic resources: legal name, known keys and valid values
(INVALID_CONFIG), existing topic (UNKNOWN_TOPIC_OR_PARTITION). Group resources
(KIP-848's group configs, `strom.config.group`): a non-empty name (the group need
not exist), known keys, valid values within the broker's group.*.min/max bounds
(INVALID_CONFIG); APPEND/SUBTRACT are INVALID_CONFIG (no group key is a LIST).

Records: one ConfigRecord per key whose value changes (value null deletes);
broker resources get a record for every key named even when unchanged, as
Kafka does to make brokers reload. AlterConfigs replaces the resource's whole
override set, so keys it omits are deleted. With eligible leader replicas enabled, a
change of min.insync.replicas is followed by a ClearElrRecord (the topic's, or every topic's
for a broker resource), as in Kafka.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from strom.config import (
    BROKER_KEYS,
    GROUP_KEYS,
    TOPIC_KEYS,
    ConfigError,
    ConfigType,
    validate_group_overrides,
)
from strom.config.alter_ops import AlterOp, list_altered
from strom.coordinator.controller.election import MIN_ISR_KEY
from strom.coordinator.controller.names import invalid_topic_name
from strom.coordinator.controller.result import ApiError, Context, ControllerError, ControllerResult
from strom.coordinator.controller.topic_creation import check_topic_configs
from strom.coordinator.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.clear_elr_record import ClearElrRecord
from strom.wire.formats.metadata.config_record import ConfigRecord
from strom.wire.message import Message
from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)


class _Resource(Protocol):
    resource_type: int
    resource_name: str


ResourceT = TypeVar("ResourceT", bound=_Resource)


def incremental_alter_configs(
    ctx: Context, request: IncrementalAlterConfigsRequest, version: int
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    outcomes, records = _each(ctx, request.resources, _incremental)
    result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    response = IncrementalAlterConfigsResponse(
        responses=[result(e.code, e.message, r.resource_type, r.resource_name) for r, e in outcomes]
    )
    return ControllerResult(response, [] if request.validate_only else records)


def alter_configs(
    ctx: Context, request: AlterConfigsRequest, version: int
) -> ControllerResult[AlterConfigsResponse]:
    outcomes, records = _each(ctx, request.resources, _legacy)
    result = AlterConfigsResponse.AlterConfigsResourceResponse
    response = AlterConfigsResponse(
        responses=[result(e.code, e.message, r.resource_type, r.resource_name) for r, e in outcomes]
    )
    return ControllerResult(response, [] if request.validate_only else records)


def _each(
    ctx: Context,
    resources: Sequence[ResourceT],
    plan: Callable[[Context, ResourceT], list[Message]],
) -> tuple[list[tuple[ResourceT, ApiError]], list[Message]]:
    """Run `plan` per resource: its outcome, and the records of those that succeed."""
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    outcomes: list[tuple[ResourceT, ApiError]] = []
    records: list[Message] = []
    for resource in resources:
        error = ApiError(ErrorCode.NONE)
        try:
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise ControllerError(
                    ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
                )
            planned = plan(ctx, resource)
            records.extend(planned)
            records.extend(_clear_elr(ctx, planned))
        except ControllerError as exc:
            error = exc.error
        outcomes.append((resource, error))
    return outcomes, records


def _clear_elr(ctx: Context, planned: list[Message]) -> list[Message]:
    """With eligible leader replicas enabled, a min.insync.replicas record clears the ELR of
    its topic, or of every topic for a broker resource (Kafka's ClearElrRecord): the ELR was
    computed against the old value."""
    if not ctx.image.elr_enabled:
        return []
    return [
        ClearElrRecord(r.resource_name if r.resource_type == TOPIC_RESOURCE else "")
        for r in planned
        if isinstance(r, ConfigRecord) and r.name == MIN_ISR_KEY
    ]


def _incremental(
    ctx: Context, resource: IncrementalAlterConfigsRequest.AlterConfigsResource
) -> list[Message]:
    ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
    _check_shape(
        [(name, value) for name, op, value in ops if op != AlterOp.DELETE], [n for n, _, _ in ops]
    )
    rtype, rname = resource.resource_type, resource.resource_name
    _check_type_and_name(ctx, rtype, rname)
    current = dict(ctx.image.config_overrides(rtype, rname))
    new = dict(current)
    named: list[str] = []
    for key, op, value in ops:
        if op == AlterOp.SET:
            new[key] = value or ""
        elif op == AlterOp.DELETE:
            new.pop(key, None)
        elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            new[key] = _list_op(rtype, key, AlterOp(op), current.get(key), value or "")
        else:
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
        named.append(key)
    _validate(ctx, rtype, rname, new)
    return _records(rtype, rname, current, new, named)


def _legacy(ctx: Context, resource: AlterConfigsRequest.AlterConfigsResource) -> list[Message]:
    pairs = [(c.name, c.value) for c in resource.configs]
    _check_shape(pairs, [n for n, _ in pairs])
    rtype, rname = resource.resource_type, resource.resource_name
    _check_type_and_name(ctx, rtype, rname)
    current = dict(ctx.image.config_overrides(rtype, rname))
    new = {name: value or "" for name, value in pairs}
    _validate(ctx, rtype, rname, new)
    return _records(rtype, rname, current, new, list(new) + [k for k in current if k not in new])


def _check_shape(values: Sequence[tuple[str, str | None]], names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise ControllerError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name for name, value in values if value is None]
    if nulls:
        raise ControllerError(
            ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        )


def _check_type_and_name(ctx: Context, rtype: int, rname: str) -> None:
    if rtype == TOPIC_RESOURCE:
        return
    if rtype == GROUP_RESOURCE:
        if not rname:
            raise ControllerError(
                ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
            )
        return
    if rtype != BROKER_RESOURCE:
        raise ControllerError(
            ErrorCode.INVALID_REQUEST,
            f"Unsupported resource type {rtype}: Strom alters only TOPIC (2), BROKER (4) and "
            "GROUP (32) configs.",
        )
    if rname:
        try:
            node = int(rname)
        except ValueError:
            raise ControllerError(
                ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {rname}"
            ) from None
        if node != ctx.node_id:
            raise ControllerError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {ctx.node_id}, but received {rname}",
            )


def _list_op(rtype: int, key: str, op: AlterOp, current: str | None, value: str) -> str:
    """APPEND/SUBTRACT on a LIST key; INVALID_CONFIG, worded as Kafka's, on any other key."""
    table = {TOPIC_RESOURCE: TOPIC_KEYS, GROUP_RESOURCE: GROUP_KEYS}.get(rtype, BROKER_KEYS)
    spec = table.get(key)
    if spec is None or spec.type is not ConfigType.LIST:
        if rtype != BROKER_RESOURCE:
            message = f"Can't {op.name} to key {key} because its type is not LIST."
        else:
            verb = "append" if op == AlterOp.APPEND else "subtract"
            message = f"Config value {verb} is not allowed for config key: {key}"
        raise ControllerError(ErrorCode.INVALID_CONFIG, message)
    return list_altered(spec, op, current, value)


def _validate(ctx: Context, rtype: int, rname: str, new: Mapping[str, str]) -> None:
    if rtype == BROKER_RESOURCE:
        reason = ctx.layers.refusal(new, per_broker=bool(rname))
        if reason is not None:
            raise ControllerError(ErrorCode.INVALID_REQUEST, reason)
        return
    if rtype == GROUP_RESOURCE:
        try:
            validate_group_overrides(new, ctx.config)
        except ConfigError as exc:
            raise ControllerError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return
    if not rname:
        raise ControllerError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    reason = invalid_topic_name(rname)
    if reason is not None:
        raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    check_topic_configs(ctx, new)
    if ctx.image.topic(rname) is None:
        raise ControllerError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{rname}' does not exist."
        )


def _records(
    rtype: int, rname: str, current: Mapping[str, str], new: Mapping[str, str], named: list[str]
) -> list[Message]:
    records: list[Message] = []
    for key in dict.fromkeys(named):
        value = new.get(key)
        if value != current.get(key) or rtype == BROKER_RESOURCE:
            records.append(ConfigRecord(rtype, rname, key, value))
    return records
