"""CreatePartitions on the pure state machine."""

from __future__ import annotations

import pytest

from strom.coordinator.controller import Controller
from strom.coordinator.controller.result import PLAN_SLICE
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from strom.wire.messages.create_topics import CreateTopicsRequest
from tests.controller.helpers import add_broker, commit, create, make_controller, topic

Grow = CreatePartitionsRequest.CreatePartitionsTopic
"""Assignments are null on the wire when not given; the generated default is []."""
Assign = CreatePartitionsRequest.CreatePartitionsAssignment


def _controller(brokers: int = 1) -> Controller:
    controller = make_controller(brokers=brokers)
    create(controller, topic("t", 2, 1))
    return controller


def _rows(response: CreatePartitionsResponse) -> list[tuple[str, int, str | None]]:
    return [(r.name, r.error_code, r.error_message) for r in response.results]


@pytest.mark.parametrize("version", range(4))
def test_grow(version: int) -> None:
    controller = _controller()
    result = controller.create_partitions(
        CreatePartitionsRequest(topics=[Grow("t", 5, None)]), version
    )
    assert _rows(result.response) == [("t", 0, None)]
    assert [r.partition_id for r in result.records] == [2, 3, 4]  # type: ignore[attr-defined]
    assert all(isinstance(r, PartitionRecord) for r in result.records)
    CreatePartitionsResponse.decode(result.response.encode(version), version)
    commit(controller, result)
    t = controller.image.topic("t")
    assert t is not None
    assert t.num_partitions == 5
    assert t.partitions[4].replicas == (1,)


def test_validate_only() -> None:
    controller = _controller()
    request = CreatePartitionsRequest(topics=[Grow("t", 3, None)], validate_only=True)
    result = controller.create_partitions(request, 3)
    assert (result.records, _rows(result.response)) == ([], [("t", 0, None)])


@pytest.mark.parametrize(
    ("grow", "code", "message"),
    [
        (Grow("nope", 3, None), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
        (Grow("t", 2, None), ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        (Grow("t", 1, None), ErrorCode.INVALID_PARTITIONS, "The topic t currently has 2 partition(s); 1 would not be an increase."),
        (Grow("t", 4, [Assign([1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (Grow("t", 3, [Assign([1, 2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent with previous partitions, which have 1 replica(s)."),
        (Grow("t", 3, [Assign([9])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 9, but no such broker is registered."),
        (Grow("t", 3, [Assign([])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        (Grow("t", 3, [Assign([3])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual partition assignment for partition 2 are fenced or in controlled shutdown."),
    ],
)  # fmt: skip
def test_errors(grow: Grow, code: int, message: str | None) -> None:
    controller = _controller(brokers=2)
    add_broker(controller, 3, fenced=True)
    result = controller.create_partitions(CreatePartitionsRequest(topics=[grow]), 3)
    assert result.records == []
    assert _rows(result.response) == [(grow.name, code, message)]


def test_manual_assignment() -> None:
    controller = _controller(brokers=2)
    request = CreatePartitionsRequest(topics=[Grow("t", 4, [Assign([2]), Assign([1])])])
    commit(controller, controller.create_partitions(request, 3))
    t = controller.image.topic("t")
    assert t is not None
    assert [(t.partitions[i].replicas, t.partitions[i].leader) for i in (2, 3)] == [
        ((2,), 2),
        ((1,), 1),
    ]


def test_duplicates_reported_first_and_others_proceed() -> None:
    controller = _controller()
    create(controller, topic("u"))
    request = CreatePartitionsRequest(
        topics=[Grow("t", 3, None), Grow("u", 2, None), Grow("t", 4, None)]
    )
    result = controller.create_partitions(request, 3)
    assert _rows(result.response) == [
        ("t", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("u", 0, None),
    ]
    assert len(result.records) == 1


def test_placement_when_replication_impossible() -> None:
    controller = make_controller(brokers=2)
    create(controller, topic("t", 1, 2))
    # broker 2 goes away: growing an RF-2 topic no longer has two usable brokers
    reg = controller.image.broker(2)
    assert reg is not None
    from strom.wire.formats.metadata.unregister_broker_record import UnregisterBrokerRecord

    controller.replay([UnregisterBrokerRecord(2, reg.epoch)])
    result = controller.create_partitions(CreatePartitionsRequest(topics=[Grow("t", 2, None)]), 3)
    assert _rows(result.response) == [
        (
            "t",
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "The target replication factor of 2 cannot be reached because only 1 broker(s) are registered.",
        )
    ]


def test_too_many_new_partitions() -> None:
    controller = _controller()
    result = controller.create_partitions(CreatePartitionsRequest(topics=[Grow("t", 20_000)]), 3)
    assert result.records == []
    assert result.response.results[0].error_code == ErrorCode.POLICY_VIOLATION


def test_empty_assignment_list_is_not_null() -> None:
    # Kafka treats [] (unlike null) as "0 assignments given"
    result = _controller().create_partitions(CreatePartitionsRequest(topics=[Grow("t", 3, [])]), 3)
    assert _rows(result.response) == [
        (
            "t",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified.",
        )
    ]


def test_planned_in_steps_it_yields_every_slice_and_plans_the_same() -> None:
    def grown() -> Controller:
        controller = make_controller(brokers=3)
        request = CreateTopicsRequest(topics=[topic("t", 2, 2)])
        controller.replay(controller.create_topics(request, 7).records)
        return controller

    request = CreatePartitionsRequest(
        topics=[CreatePartitionsRequest.CreatePartitionsTopic("t", 2 + 3 * PLAN_SLICE, None)]
    )
    at_once = grown().create_partitions(request, 3)
    steps = grown().create_partitions_steps(request, 3)
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            stepped = done.value
            break
        yields += 1
    assert yields >= 2 + 3  # placed (between slices), then recorded
    assert stepped.records == at_once.records
    assert len(stepped.records) == 3 * PLAN_SLICE
    assert stepped.response == at_once.response
