"""CreateTopics (v2-7) with the KRaft controller's checks, in its order.

Per topic: name legality and '.'/'_' collision with an existing topic
(INVALID_TOPIC_EXCEPTION), TOPIC_ALREADY_EXISTS, null or invalid configs
(INVALID_CONFIG), manual assignments (INVALID_REQUEST when counts are not -1,
INVALID_REPLICA_ASSIGNMENT), INVALID_REPLICATION_FACTOR / INVALID_PARTITIONS
for non-positive values other than -1 (= broker default), then placement.
Names given twice get one INVALID_REQUEST "Duplicate topic name." each, after
the other results; more than 10,000 partitions in one request fail every
topic with POLICY_VIOLATION. As in Kafka, collisions are checked against
existing topics only, and validate_only still reports a (fresh) topic id.
Records per topic: TopicRecord, its ConfigRecords, then PartitionRecords.

`create_topics_steps` plans in steps (`result.Planning`): it yields every PLAN_SLICE
partitions, so the driver's event loop runs while 10,000 are placed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Mapping

from strom.config import TOPIC_KEYS, ConfigError, resolve_topic_config, validate_topic_overrides
from strom.config.resolve import entry_source
from strom.coordinator.controller.names import colliding_topic, invalid_topic_name
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
    ApiError,
    Context,
    ControllerError,
    ControllerResult,
    Planning,
    finish,
)
from strom.coordinator.metadata.image import TOPIC_RESOURCE
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.config_record import ConfigRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.message import Message
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

Topic = CreateTopicsRequest.CreatableTopic
Result = CreateTopicsResponse.CreatableTopicResult


def create_topics(
    ctx: Context, request: CreateTopicsRequest, version: int
) -> ControllerResult[CreateTopicsResponse]:
    """Validate and plan every topic; records only for the ones that succeed."""
    return finish(create_topics_steps(ctx, request, version))


def create_topics_steps(
    ctx: Context, request: CreateTopicsRequest, version: int
) -> Planning[CreateTopicsResponse]:
    """`create_topics` in steps (see the module docstring)."""
    response = CreateTopicsResponse(topics=[])
    counts = Counter(t.name for t in request.topics)
    unique = [t for t in request.topics if counts[t.name] == 1]
    if _total_partitions(ctx, unique) > MAX_PARTITIONS_PER_REQUEST:
        for topic in request.topics:
            response.topics.append(_error(topic.name, TOO_MANY_PARTITIONS))
        return ControllerResult(response)
    records: list[Message] = []
    for topic in unique:
        try:
            result, topic_records = yield from _create_one(ctx, topic)
        except ControllerError as exc:
            response.topics.append(_error(topic.name, exc.error))
            continue
        response.topics.append(result)
        records.extend(topic_records)
    for name in dict.fromkeys(t.name for t in request.topics if counts[t.name] > 1):
        duplicate = ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
        response.topics.append(_error(name, duplicate))
    return ControllerResult(response, [] if request.validate_only else records)


def _total_partitions(ctx: Context, topics: list[Topic]) -> int:
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += ctx.config.num_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _error(name: str, error: ApiError) -> Result:
    return Result(name=name, error_code=error.code, error_message=error.message)


Steps = Generator[None, None, list[tuple[list[int], list[int]]]]


def _create_one(
    ctx: Context, topic: Topic
) -> Generator[None, None, tuple[Result, list[Message]]]:
    name = topic.name
    reason = invalid_topic_name(name)
    if reason is not None:
        raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    clash = colliding_topic(ctx.image, name)
    if clash is not None:
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{name}' collides with existing topic: {clash}",
        )
    if ctx.image.topic(name) is not None:
        raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    overrides = check_topic_configs(ctx, {c.name: c.value for c in topic.configs})
    assignments = yield from _assignments(ctx, topic)
    topic_id = ctx.new_uuid()
    records: list[Message] = [TopicRecord(name, topic_id)]
    records += [ConfigRecord(TOPIC_RESOURCE, name, k, overrides[k]) for k in sorted(overrides)]
    for start in range(0, len(assignments), PLAN_SLICE):
        records += [
            partition_record(topic_id, i, *assignments[i])
            for i in range(start, min(start + PLAN_SLICE, len(assignments)))
        ]
        yield
    result = Result(
        name=name,
        topic_id=topic_id,
        error_message=None,
        num_partitions=len(assignments),
        replication_factor=len(assignments[0][0]),
        configs=_described_configs(ctx, overrides),
    )
    return result, records


def check_topic_configs(ctx: Context, configs: Mapping[str, str | None]) -> dict[str, str]:
    """Topic overrides as Kafka's controller vets them; ControllerError(INVALID_CONFIG)."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise ControllerError(
            ErrorCode.INVALID_CONFIG,
            "Null value not supported for topic configs: " + ",".join(nulls),
        )
    overrides = {k: v for k, v in configs.items() if v is not None}
    unknown = next((k for k in overrides if k not in TOPIC_KEYS), None)
    if unknown is not None:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown}")
    try:
        validate_topic_overrides(overrides, ctx.config)
    except ConfigError as exc:
        raise ControllerError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return overrides


def _assignments(ctx: Context, topic: Topic) -> Steps:
    """(replicas, isr) per partition index, from the request or from placement."""
    image = ctx.image
    if topic.assignments:
        counts = (
            ("replication factor", topic.replication_factor),
            ("numPartitions", topic.num_partitions),
        )
        for field, value in counts:
            if value != -1:
                raise ControllerError(
                    ErrorCode.INVALID_REQUEST,
                    f"A manual partition assignment was specified, but {field} was not set to -1.",
                )
        by_index: dict[int, tuple[list[int], list[int]]] = {}
        factor: int | None = None
        for a in topic.assignments:
            if a.partition_index in by_index:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "Found multiple manual partition assignments for partition "
                    f"{a.partition_index}",
                )
            check_manual_assignment(image, a.broker_ids, factor)
            factor = len(a.broker_ids)
            isr = active_replicas(image, a.broker_ids)
            if not isr:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "All brokers specified in the manual partition assignment for partition "
                    f"{a.partition_index} are fenced or in controlled shutdown.",
                )
            by_index[a.partition_index] = (list(a.broker_ids), isr)
            if len(by_index) % PLAN_SLICE == 0:
                yield
        if sorted(by_index) != list(range(len(by_index))):
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "partitions should be a consecutive 0-based integer sequence",
            )
        return [by_index[i] for i in range(len(by_index))]
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise ControllerError(
            ErrorCode.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        )
    count = ctx.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = (
        ctx.config.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    try:
        chosen = placer(image, factor)
    except ControllerError as exc:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {factor} time(s): {exc.error.message}",
        ) from exc
    out = []
    for index in range(count):
        if index and index % PLAN_SLICE == 0:
            yield
        replicas = chosen.replicas(index)
        isr = active_replicas(image, replicas)
        if not isr:
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {factor} time(s): All brokers are "
                "currently fenced or in controlled shutdown.",
            )
        out.append((replicas, isr))
    return out


def _described_configs(
    ctx: Context, overrides: Mapping[str, str]
) -> list[CreateTopicsResponse.CreatableTopicConfigs]:
    """The new topic's effective configs, sorted, as CreateTopics v5+ reports them."""
    return [
        CreateTopicsResponse.CreatableTopicConfigs(
            name=entry.name,
            value=None if entry.is_sensitive else entry.value,
            read_only=entry.read_only,
            config_source=entry_source(entry, ctx.layers),
            is_sensitive=entry.is_sensitive,
        )
        # with the layers, so dynamic broker defaults carry their sources, as DescribeConfigs'
        for entry in resolve_topic_config(ctx.config, overrides, layers=ctx.layers)
    ]
