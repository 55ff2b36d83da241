"""CreatePartitions (v0-3): grow a topic to `count` partitions, as KRaft checks it.

Names given twice get INVALID_REQUEST "Duplicate topic name." first; then per
topic in request order: UNKNOWN_TOPIC_OR_PARTITION (no message), INVALID_PARTITIONS
when `count` is not an increase, INVALID_REPLICA_ASSIGNMENT for assignments
that do not match the number added or break the manual-assignment rules,
INVALID_REPLICATION_FACTOR when placement is impossible. New partitions keep
the replication factor of partition 0. `validate_only` returns the same
results without records. `create_partitions_steps` plans in steps (`result.Planning`),
yielding every PLAN_SLICE partitions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator

from strom.coordinator.controller.placement import (
    MAX_PARTITIONS_PER_REQUEST,
    TOO_MANY_PARTITIONS,
    active_replicas,
    check_manual_assignment,
    partition_record,
    placer,
)
from strom.coordinator.controller.result import (
    PLAN_SLICE,
    Context,
    ControllerError,
    ControllerResult,
    Planning,
    finish,
)
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def create_partitions(
    ctx: Context, request: CreatePartitionsRequest, version: int
) -> ControllerResult[CreatePartitionsResponse]:
    return finish(create_partitions_steps(ctx, request, version))


def create_partitions_steps(
    ctx: Context, request: CreatePartitionsRequest, version: int
) -> Planning[CreatePartitionsResponse]:
    """`create_partitions` in steps (see the module docstring)."""
    response = CreatePartitionsResponse(results=[])
    counts = Counter(t.name for t in request.topics)
    for name in dict.fromkeys(t.name for t in request.topics if counts[t.name] > 1):
        response.results.append(Result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
    unique = [t for t in request.topics if counts[t.name] == 1]
    added = 0
    for t in unique:
        image = ctx.image.topic(t.name)
        added += max(0, t.count - image.num_partitions) if image is not None else 0
    if added > MAX_PARTITIONS_PER_REQUEST:
        code, message = TOO_MANY_PARTITIONS
        response.results.extend(Result(t.name, code, message) for t in unique)
        return ControllerResult(response)
    records: list[Message] = []
    for topic in unique:
        try:
            records.extend((yield from _grow(ctx, topic)))
            response.results.append(Result(topic.name, ErrorCode.NONE, None))
        except ControllerError as exc:
            response.results.append(Result(topic.name, exc.error.code, exc.error.message))
    return ControllerResult(response, [] if request.validate_only else records)


def _grow(
    ctx: Context, request: CreatePartitionsRequest.CreatePartitionsTopic
) -> Generator[None, None, list[Message]]:
    image = ctx.image
    topic = image.topic(request.name)
    if topic is None:
        raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    current = topic.num_partitions
    if request.count == current:
        raise ControllerError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
        )
    if request.count < current:
        raise ControllerError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {request.name} currently has {current} partition(s); "
            f"{request.count} would not be an increase.",
        )
    additional = request.count - current
    assignments = request.assignments
    if assignments is not None and len(assignments) != additional:
        raise ControllerError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified.",
        )
    first = topic.partition(0)
    if first is None:
        raise ControllerError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"Invalid state: topic {request.name} appears to have no partitions.",
        )
    factor = len(first.replicas)
    planned: list[tuple[list[int], list[int]]] = []
    if assignments is not None:
        for offset, assignment in enumerate(assignments):
            check_manual_assignment(image, assignment.broker_ids, factor)
            isr = active_replicas(image, assignment.broker_ids)
            if not isr:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "All brokers specified in the manual partition assignment for partition "
                    f"{current + offset} are fenced or in controlled shutdown.",
                )
            planned.append((list(assignment.broker_ids), isr))
            if len(planned) % PLAN_SLICE == 0:
                yield
    else:
        chosen = placer(image, factor)
        for index in range(current, current + additional):
            if len(planned) and len(planned) % PLAN_SLICE == 0:
                yield
            replicas = chosen.replicas(index)
            isr = active_replicas(image, replicas)
            if not isr:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {factor} time(s): All brokers are "
                    "currently fenced or in controlled shutdown.",
                )
            planned.append((replicas, isr))
    records: list[Message] = []
    for start in range(0, len(planned), PLAN_SLICE):
        records += [
            partition_record(topic.topic_id, current + i, *planned[i])
            for i in range(start, min(start + PLAN_SLICE, len(planned)))
        ]
        yield
    return records
