"""CreateTopics on the pure state machine: every success and error path."""

from __future__ import annotations

import uuid

import pytest

from strom.config import ConfigSource
from strom.coordinator.controller import Controller
from strom.coordinator.controller.result import PLAN_SLICE
from strom.coordinator.metadata.image import TOPIC_RESOURCE
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.config_record import ConfigRecord
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from tests.controller.helpers import add_broker, create, errors, make_controller, topic


def test_create_records_and_response() -> None:
    controller = make_controller()
    request = CreateTopicsRequest(
        topics=[
            topic("orders", 3, 1, configs={"retention.ms": "1000", "cleanup.policy": "compact"})
        ]
    )
    result = controller.create_topics(request, 7)
    kinds = [type(r) for r in result.records]
    assert kinds == [TopicRecord, ConfigRecord, ConfigRecord] + [PartitionRecord] * 3
    assert [r.name for r in result.records[1:3]] == ["cleanup.policy", "retention.ms"]  # type: ignore[attr-defined]
    (entry,) = result.response.topics
    assert (entry.error_code, entry.error_message) == (0, None)
    assert (entry.num_partitions, entry.replication_factor) == (3, 1)
    assert entry.topic_id == result.records[0].topic_id  # type: ignore[attr-defined]
    configs = {c.name: c for c in entry.configs or []}
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert list(configs) == sorted(configs)
    assert controller.image.topic("orders") is None  # nothing changes before replay
    controller.replay(result.records)
    image = controller.image
    t = image.topic("orders")
    assert t is not None
    assert t.num_partitions == 3
    assert image.topic_by_id(entry.topic_id) is t
    p = image.partition("orders", 2)
    assert p is not None
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((1,), (1,), 1, 0)
    assert image.topic_config_overrides("orders") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }


def test_defaults_from_broker_config() -> None:
    controller = make_controller({"num.partitions": "4", "default.replication.factor": "1"})
    (entry,) = create(controller, topic("t", -1, -1)).topics
    assert (entry.error_code, entry.num_partitions, entry.replication_factor) == (0, 4, 1)


def test_static_broker_config_reported_as_static_source() -> None:
    controller = make_controller({"log.retention.ms": "5000"})
    (entry,) = create(controller, topic("t")).topics
    retention = next(c for c in entry.configs or [] if c.name == "retention.ms")
    assert (retention.value, retention.config_source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)


def test_validate_only_creates_nothing() -> None:
    controller = make_controller()
    request = CreateTopicsRequest(topics=[topic("t", 2)], validate_only=True)
    result = controller.create_topics(request, 7)
    assert result.records == []
    assert result.response.topics[0].error_code == 0
    assert result.response.topics[0].num_partitions == 2


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        ("a" * 250, f"Topic name is invalid: the length of '{'a' * 250}' is longer than the max allowed length 249"),
        ("bad/name", "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ("héllo", "Topic name is invalid: 'héllo' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ],
)  # fmt: skip
def test_invalid_names(name: str, message: str) -> None:
    (entry,) = create(make_controller(), topic(name)).topics
    assert (entry.error_code, entry.error_message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, message)


def test_longest_legal_name() -> None:
    (entry,) = create(make_controller(), topic("x" * 249)).topics
    assert entry.error_code == 0


def test_collision_with_existing_topic() -> None:
    controller = make_controller()
    create(controller, topic("a.b"))
    (entry,) = create(controller, topic("a_b")).topics
    assert entry.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert entry.error_message == "Topic 'a_b' collides with existing topic: a.b"


def test_collision_within_one_request_is_allowed_like_kafka() -> None:
    response = create(make_controller(), topic("x.y"), topic("x_y"))
    assert errors(response.topics) == {"x.y": 0, "x_y": 0}


def test_already_exists() -> None:
    controller = make_controller()
    create(controller, topic("t.x"))
    (entry,) = create(controller, topic("t.x")).topics
    assert (entry.error_code, entry.error_message) == (
        ErrorCode.TOPIC_ALREADY_EXISTS,
        "Topic 't.x' already exists.",
    )
    assert (entry.num_partitions, entry.replication_factor, entry.topic_id) == (
        -1,
        -1,
        uuid.UUID(int=0),
    )


def test_duplicate_names_in_request() -> None:
    response = create(make_controller(), topic("d"), topic("ok"), topic("d"))
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("ok", 0, None),
        ("d", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
        ({"no.such.key": "1"}, "Unknown topic config name: no.such.key"),
        ({"retention.ms": "soon"}, None),
        ({"cleanup.policy": "shred"}, None),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, None),
    ],
)
def test_invalid_configs(configs: dict[str, str | None], message: str | None) -> None:
    (entry,) = create(make_controller(), topic("t", configs=configs)).topics
    assert entry.error_code == ErrorCode.INVALID_CONFIG
    assert entry.error_message
    if message is not None:
        assert entry.error_message == message
    else:
        assert next(iter(configs)) in entry.error_message


@pytest.mark.parametrize(
    ("partitions", "replication", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (-2, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value."),
        (1, -5, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value."),
        (1, 2, ErrorCode.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 2 time(s): The target replication factor of 2 cannot be reached because only 1 broker(s) are registered."),
    ],
)  # fmt: skip
def test_counts(partitions: int, replication: int, code: int, message: str) -> None:
    (entry,) = create(make_controller(), topic("t", partitions, replication)).topics
    assert (entry.error_code, entry.error_message) == (code, message)


def test_replication_factor_default_too_large() -> None:
    controller = make_controller({"default.replication.factor": "3"}, brokers=2)
    (entry,) = create(controller, topic("t", 1, -1)).topics
    assert entry.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_all_brokers_fenced() -> None:
    controller = make_controller()
    node = controller.image.broker(1)
    assert node is not None
    from strom.wire.formats.metadata.fence_broker_record import FenceBrokerRecord

    controller.replay([FenceBrokerRecord(1, node.epoch)])
    (entry,) = create(controller, topic("t")).topics
    assert (entry.error_code, entry.error_message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced.",
    )


def test_placement_spreads_over_brokers() -> None:
    controller = make_controller(brokers=3)
    create(controller, topic("t", 3, 2))
    t = controller.image.topic("t")
    assert t is not None
    assert [t.partitions[i].replicas for i in range(3)] == [(1, 2), (2, 3), (3, 1)]
    assert [t.partitions[i].leader for i in range(3)] == [1, 2, 3]


def test_fenced_broker_is_replica_but_not_in_isr() -> None:
    controller = make_controller()
    add_broker(controller, 2, fenced=True)
    create(controller, topic("t", 2, 2))
    t = controller.image.topic("t")
    assert t is not None
    assert [(p.replicas, p.isr, p.leader) for p in t.partitions.values()] == [((1, 2), (1,), 1)] * 2


def test_manual_assignment() -> None:
    controller = make_controller(brokers=2)
    response = create(controller, topic("t", -1, -1, assignments=[(1, [1, 2]), (0, [2, 1])]))
    assert (response.topics[0].error_code, response.topics[0].num_partitions) == (0, 2)
    assert response.topics[0].replication_factor == 2
    t = controller.image.topic("t")
    assert t is not None
    assert (t.partitions[0].replicas, t.partitions[0].leader) == ((2, 1), 2)


@pytest.mark.parametrize(
    ("partitions", "replication", "assignments", "code", "message"),
    [
        (1, -1, [(0, [1])], ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1."),
        (-1, 1, [(0, [1])], ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not set to -1."),
        (-1, -1, [(0, [1]), (0, [2])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments for partition 0"),
        (-1, -1, [(0, [])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        (-1, -1, [(0, [7])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 7, but no such broker is registered."),
        (-1, -1, [(0, [1, 1])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 1 more than once."),
        (-1, -1, [(0, [1]), (1, [1, 2])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent with previous partitions, which have 1 replica(s)."),
        (-1, -1, [(1, [1])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"),
        (-1, -1, [(0, [3])], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown."),
    ],
)  # fmt: skip
def test_bad_manual_assignments(
    partitions: int,
    replication: int,
    assignments: list[tuple[int, list[int]]],
    code: int,
    message: str,
) -> None:
    controller = make_controller(brokers=2)
    add_broker(controller, 3, fenced=True)
    (entry,) = create(
        controller, topic("t", partitions, replication, assignments=assignments)
    ).topics
    assert (entry.error_code, entry.error_message) == (code, message)


def test_one_failure_does_not_block_others() -> None:
    controller = make_controller()
    response = create(controller, topic("good", 2), topic("bad!"), topic("also-good"))
    assert errors(response.topics) == {
        "good": 0,
        "bad!": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "also-good": 0,
    }
    assert controller.image.topic_names() == ["also-good", "good"]


def test_too_many_partitions_in_one_request() -> None:
    controller = make_controller()
    result = controller.create_topics(
        CreateTopicsRequest(topics=[topic("a", 6000), topic("b", 5000)]), 7
    )
    assert result.records == []
    assert {t.error_code for t in result.response.topics} == {ErrorCode.POLICY_VIOLATION}
    assert (
        result.response.topics[0].error_message
        == "Excessively large number of partitions per request."
    )


@pytest.mark.parametrize("version", range(2, 8))
def test_response_encodes_at_every_version(version: int) -> None:
    controller = make_controller()
    response = create(controller, topic("t", 1), topic("bad!"), version=version)
    decoded = CreateTopicsResponse.decode(response.encode(version), version)
    assert decoded.topics[0].name == "t"
    if version >= 5:
        assert decoded.topics[0].num_partitions == 1
        assert decoded.topics[0].configs
    if version >= 7:
        assert decoded.topics[0].topic_id == controller.image.topic("t").topic_id  # type: ignore[union-attr]


def test_ids_come_from_the_given_source() -> None:
    a, b = make_controller(), make_controller()
    ra = a.create_topics(CreateTopicsRequest(topics=[topic("t", 2)]), 7)
    rb = b.create_topics(CreateTopicsRequest(topics=[topic("t", 2)]), 7)
    assert ra.records == rb.records  # same inputs, same ids: deterministic


def test_topic_config_records_resource() -> None:
    controller = make_controller()
    result = controller.create_topics(
        CreateTopicsRequest(topics=[topic("t", configs={"retention.ms": "7"})]), 7
    )
    record = result.records[1]
    assert isinstance(record, ConfigRecord)
    assert (record.resource_type, record.resource_name) == (TOPIC_RESOURCE, "t")


def _racked(racks: dict[int, str | None]) -> Controller:
    """Node 1 (no rack) plus brokers with the given racks."""
    controller = make_controller()
    for broker_id, rack in racks.items():
        add_broker(controller, broker_id, rack=rack)
    return controller


def test_rack_aware_placement_puts_each_replica_on_another_rack() -> None:
    racks: dict[int, str | None] = {2: "a", 3: "a", 4: "b", 5: "b", 6: "c", 7: "c"}
    controller = _racked(racks)
    create(controller, topic("t", 12, 3))
    t = controller.image.topic("t")
    assert t is not None
    every = {**racks, 1: None}
    for p in t.partitions.values():
        assert len({every[r] for r in p.replicas}) == 3, p.replicas
    # leadership rotates over every broker (node 1's missing rack is a rack of its own)
    leaders = [p.leader for p in t.partitions.values()]
    assert sorted(set(leaders)) == [1, 2, 3, 4, 5, 6, 7]


def test_more_replicas_than_racks_uses_each_rack_before_repeating_one() -> None:
    racks: dict[int, str | None] = {2: "a", 3: "a", 4: "b", 5: "b"}
    controller = _racked({**racks})
    create(controller, topic("t", 6, 4))
    t = controller.image.topic("t")
    assert t is not None
    every = {**racks, 1: None}
    for p in t.partitions.values():
        assert len(set(p.replicas)) == 4
        assert {every[r] for r in p.replicas[:3]} == {None, "a", "b"}, p.replicas


def test_planned_in_steps_it_yields_every_slice_and_plans_the_same() -> None:
    """`create_topics_steps` yields every PLAN_SLICE partitions (placing them, then making
    their records), so a host can let its loop run; run to its end it plans what
    `create_topics` plans, manual assignments included."""
    request = CreateTopicsRequest(
        topics=[
            topic("big", 4 * PLAN_SLICE, 2),
            topic("manual", -1, -1, assignments=[(i, [1 + i % 3]) for i in range(PLAN_SLICE)]),
            topic("bad", 3, 9),  # INVALID_REPLICATION_FACTOR: no records
        ]
    )
    at_once = make_controller(brokers=3).create_topics(request, 7)
    steps = make_controller(brokers=3).create_topics_steps(request, 7)
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            stepped = done.value
            break
        yields += 1
    assert yields >= 3 + 4  # "big" alone: placed (between slices), then recorded
    assert stepped.records == at_once.records
    assert stepped.response == at_once.response
    assert [t.error_code for t in stepped.response.topics] == [
        0, 0, ErrorCode.INVALID_REPLICATION_FACTOR,
    ]  # fmt: skip


def test_staged_in_steps_it_is_the_same_delta() -> None:
    controller = make_controller(brokers=3)
    records = controller.create_topics(
        CreateTopicsRequest(topics=[topic("t", 3 * PLAN_SLICE, 3)]), 7
    ).records
    steps = controller.stage_steps(records)
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            delta = done.value
            break
        yields += 1
    assert yields == 3  # len(records) = 3 * PLAN_SLICE + 1
    assert delta.apply() == controller.stage(records).apply()
    assert controller.image.topic("t") is None  # staged, not adopted
