"""AlterPartition in the pure controller: ISR shrink and expand, fenced by both epochs."""

from __future__ import annotations

import uuid

import pytest

from strom.coordinator.controller import Controller
from strom.coordinator.metadata.image import PartitionImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from tests.controller.helpers import add_broker, commit, create, make_controller, topic

LEADER_EPOCH = {1: 1, 2: 102, 3: 103, 4: 104}
"""Broker epochs as the helpers register them (node 1 at 1, broker n at 100 + n)."""


def _cluster() -> tuple[Controller, uuid.UUID]:
    controller = make_controller(brokers=3)
    created = create(
        controller, topic("t", partitions=-1, replication=-1, assignments=[(0, [1, 2, 3])])
    )
    assert created.topics[0].error_code == 0
    return controller, created.topics[0].topic_id


def _partition(controller: Controller, topic_id: uuid.UUID) -> PartitionImage:
    found = controller.image.topics_by_id[topic_id].partition(0)
    assert found is not None
    return found


def _alter(
    controller: Controller,
    topic_id: uuid.UUID,
    isr: list[int],
    *,
    broker_id: int = 1,
    broker_epoch: int | None = None,
    leader_epoch: int | None = None,
    partition_epoch: int | None = None,
    recovery: int = 0,
    member_epochs: dict[int, int] | None = None,
    version: int = 3,
) -> AlterPartitionResponse:
    current = _partition(controller, topic_id)
    epochs = {**LEADER_EPOCH, **(member_epochs or {})}
    data = AlterPartitionRequest.PartitionData(
        partition_index=0,
        leader_epoch=current.leader_epoch if leader_epoch is None else leader_epoch,
        new_isr=isr if version < 3 else [],
        new_isr_with_epochs=[AlterPartitionRequest.BrokerState(b, epochs.get(b, -1)) for b in isr]
        if version >= 3
        else [],
        leader_recovery_state=recovery,
        partition_epoch=current.partition_epoch if partition_epoch is None else partition_epoch,
    )
    request = AlterPartitionRequest(
        broker_id=broker_id,
        broker_epoch=LEADER_EPOCH[broker_id] if broker_epoch is None else broker_epoch,
        topics=[AlterPartitionRequest.TopicData(topic_id, [data])],
    )
    return commit(controller, controller.alter_partition(request, version))


def _code(response: AlterPartitionResponse) -> int:
    return response.topics[0].partitions[0].error_code


@pytest.mark.parametrize("version", [2, 3])
def test_the_leader_shrinks_then_expands_its_isr(version: int) -> None:
    controller, topic_id = _cluster()
    before = _partition(controller, topic_id)
    assert (before.leader, before.isr) == (1, (1, 2, 3))

    shrunk = _alter(controller, topic_id, [1, 2], version=version).topics[0].partitions[0]
    after = _partition(controller, topic_id)
    assert after.isr == (1, 2)
    assert after.leader == 1
    assert after.leader_epoch == before.leader_epoch
    assert after.partition_epoch == before.partition_epoch + 1
    assert (shrunk.error_code, shrunk.isr, shrunk.leader_id) == (0, [1, 2], 1)
    assert (shrunk.leader_epoch, shrunk.partition_epoch) == (
        after.leader_epoch,
        after.partition_epoch,
    )

    grown = _alter(controller, topic_id, [1, 2, 3], version=version).topics[0].partitions[0]
    assert grown.error_code == 0
    assert grown.isr == [1, 2, 3]
    assert _partition(controller, topic_id).partition_epoch == before.partition_epoch + 2


def test_an_unchanged_isr_writes_nothing_and_answers_the_current_state() -> None:
    controller, topic_id = _cluster()
    before = _partition(controller, topic_id)
    request_result = _alter(controller, topic_id, [1, 2, 3])
    assert _code(request_result) == 0
    assert _partition(controller, topic_id) == before


def test_a_stale_request_is_fenced_by_either_epoch() -> None:
    controller, topic_id = _cluster()
    assert _code(_alter(controller, topic_id, [1, 2])) == 0  # partition epoch now 1
    # the same leader epoch but the partition epoch it read before the change
    assert (
        _code(_alter(controller, topic_id, [1], partition_epoch=0))
        == ErrorCode.INVALID_UPDATE_VERSION
    )
    # epochs newer than this controller knows: it is behind, the leader should find another
    assert _code(_alter(controller, topic_id, [1], leader_epoch=5)) == ErrorCode.NOT_CONTROLLER
    assert _code(_alter(controller, topic_id, [1], partition_epoch=9)) == ErrorCode.NOT_CONTROLLER
    assert _partition(controller, topic_id).isr == (1, 2)


def test_an_older_leader_epoch_is_fenced() -> None:
    controller, topic_id = _cluster()
    # an election (here re-electing broker 1) bumps the leader epoch to 1
    controller.replay([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=1)])
    assert _partition(controller, topic_id).leader_epoch == 1
    assert _code(_alter(controller, topic_id, [1], leader_epoch=0)) == ErrorCode.FENCED_LEADER_EPOCH


def test_only_the_leader_may_alter_and_its_broker_epoch_must_be_current() -> None:
    controller, topic_id = _cluster()
    assert _code(_alter(controller, topic_id, [1, 2], broker_id=2)) == ErrorCode.INVALID_REQUEST
    stale = _alter(controller, topic_id, [1, 2], broker_epoch=0)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert stale.topics == []
    unknown = _alter(controller, topic_id, [1, 2], broker_id=4)
    assert unknown.error_code == ErrorCode.STALE_BROKER_EPOCH


@pytest.mark.parametrize(
    "isr",
    [[], [2, 3], [1, 1, 2], [1, 2, 7]],
    ids=["empty", "without-the-leader", "duplicate", "not-a-replica"],
)
def test_an_impossible_isr_is_an_invalid_request(isr: list[int]) -> None:
    controller, topic_id = _cluster()
    assert _code(_alter(controller, topic_id, isr)) == ErrorCode.INVALID_REQUEST


def test_fenced_shutting_down_or_re_registered_members_are_ineligible() -> None:
    controller, topic_id = _cluster()
    assert _code(_alter(controller, topic_id, [1])) == 0
    add_broker(controller, 2, fenced=True)
    assert _code(_alter(controller, topic_id, [1, 2])) == ErrorCode.INELIGIBLE_REPLICA
    add_broker(controller, 3, shutting_down=True)
    assert _code(_alter(controller, topic_id, [1, 3])) == ErrorCode.INELIGIBLE_REPLICA
    add_broker(controller, 3)
    stale = _alter(controller, topic_id, [1, 3], member_epochs={3: 42})
    assert _code(stale) == ErrorCode.INELIGIBLE_REPLICA
    assert _code(_alter(controller, topic_id, [1, 3])) == 0
    assert _partition(controller, topic_id).isr == (1, 3)


def test_leader_recovery_state_rules() -> None:
    controller, topic_id = _cluster()
    # a recovered leader cannot go back to recovering
    assert _code(_alter(controller, topic_id, [1], recovery=1)) == ErrorCode.INVALID_REQUEST
    # a recovering leader (after an unclean election) may not have followers in its ISR yet
    controller.replay(
        [PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=[1], leader_recovery_state=1)]
    )
    assert _code(_alter(controller, topic_id, [1, 2], recovery=1)) == ErrorCode.INVALID_REQUEST
    done = _alter(controller, topic_id, [1, 2], recovery=0).topics[0].partitions[0]
    assert (done.error_code, done.leader_recovery_state, done.isr) == (0, 0, [1, 2])


def test_unknown_topics_and_partitions() -> None:
    controller, topic_id = _cluster()
    request = AlterPartitionRequest(
        broker_id=1,
        broker_epoch=1,
        topics=[
            AlterPartitionRequest.TopicData(
                uuid.UUID(int=77), [AlterPartitionRequest.PartitionData(partition_index=0)]
            ),
            AlterPartitionRequest.TopicData(
                topic_id, [AlterPartitionRequest.PartitionData(partition_index=5)]
            ),
        ],
    )
    response = commit(controller, controller.alter_partition(request, 3))
    assert [t.partitions[0].error_code for t in response.topics] == [
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
