"""Partition reassignment (APIs 45, 46) in the pure controller, completed through AlterPartition."""

from __future__ import annotations

import uuid

from strom.coordinator.controller import Controller
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from strom.wire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from tests.controller.helpers import commit
from tests.controller.leadership_helpers import (
    alter_isr,
    cluster,
    fence,
    part,
    set_topic_config,
    unfence,
)

Request = AlterPartitionReassignmentsRequest


def _reassign(
    controller: Controller, replicas: list[int] | None, *, name: str = "t", index: int = 0
) -> tuple[int, str | None]:
    request = Request(
        topics=[Request.ReassignableTopic(name, [Request.ReassignablePartition(index, replicas)])]
    )
    response: AlterPartitionReassignmentsResponse = commit(
        controller, controller.alter_partition_reassignments(request, 0)
    )
    answer = response.responses[0].partitions[0]
    return answer.error_code, answer.error_message


def _list(
    controller: Controller, topics: dict[str, list[int]] | None = None
) -> ListPartitionReassignmentsResponse:
    request = ListPartitionReassignmentsRequest(
        topics=None
        if topics is None
        else [ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(n, ps)
              for n, ps in topics.items()]
    )  # fmt: skip
    return controller.list_partition_reassignments(request, 0).response


def _state(controller: Controller, topic_id: uuid.UUID) -> tuple[object, ...]:
    p = part(controller, topic_id)
    return p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas


def test_adding_a_replica_waits_for_it_to_join_the_isr() -> None:
    controller, topic_id = cluster([1, 2])
    assert _reassign(controller, [1, 2, 3]) == (ErrorCode.NONE, None)
    assert _state(controller, topic_id) == ((1, 2, 3), (1, 2), 1, (3,), ())
    listed = _list(controller)
    assert [(t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
                      for p in t.partitions]) for t in listed.topics] == [
        ("t", [(0, [1, 2, 3], [3], [])])
    ]  # fmt: skip
    answer = alter_isr(controller, topic_id, [1, 2, 3])
    assert answer.error_code == ErrorCode.NONE
    assert _state(controller, topic_id) == ((1, 2, 3), (1, 2, 3), 1, (), ())
    assert _list(controller).topics == []


def test_moving_a_partition_away_from_its_leader_elects_a_new_one_on_completion() -> None:
    controller, topic_id = cluster([1, 2])
    assert _reassign(controller, [3, 4])[0] == ErrorCode.NONE
    assert _state(controller, topic_id) == ((3, 4, 1, 2), (1, 2), 1, (3, 4), (1, 2))
    before = part(controller, topic_id)
    answer = alter_isr(controller, topic_id, [1, 2, 3])
    assert answer.error_code == ErrorCode.NONE  # 4 still missing: in progress
    answer = alter_isr(controller, topic_id, [1, 2, 3, 4])
    assert answer.error_code == ErrorCode.NEW_LEADER_ELECTED
    after = part(controller, topic_id)
    assert _state(controller, topic_id) == ((3, 4), (3, 4), 3, (), ())
    assert after.leader_epoch == before.leader_epoch + 1


def test_removing_a_follower_completes_at_once_and_bumps_the_leader_epoch() -> None:
    controller, topic_id = cluster([1, 2, 3])
    before = part(controller, topic_id)
    assert _reassign(controller, [1, 2])[0] == ErrorCode.NONE
    after = part(controller, topic_id)
    assert _state(controller, topic_id) == ((1, 2), (1, 2), 1, (), ())
    assert after.leader_epoch == before.leader_epoch + 1


def test_reassigning_to_the_same_replicas_changes_nothing() -> None:
    controller, topic_id = cluster([1, 2])
    before = part(controller, topic_id)
    result = controller.alter_partition_reassignments(
        Request(
            topics=[Request.ReassignableTopic("t", [Request.ReassignablePartition(0, [1, 2])])]
        ),
        0,
    )
    assert result.records == []
    assert result.response.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert part(controller, topic_id) == before


def test_cancel_reverts_the_adding_replicas() -> None:
    controller, topic_id = cluster([1, 2])
    _reassign(controller, [2, 3])
    assert _state(controller, topic_id) == ((2, 3, 1), (1, 2), 1, (3,), (1,))
    assert _reassign(controller, None) == (ErrorCode.NONE, None)
    assert _state(controller, topic_id) == ((2, 1), (1, 2), 1, (), ())


def test_cancel_without_a_reassignment_in_progress() -> None:
    controller, _ = cluster([1, 2])
    assert _reassign(controller, None)[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it() -> None:
    controller, topic_id = cluster([1])
    _reassign(controller, [3, 4])
    alter_isr(controller, topic_id, [1, 3])  # 3 caught up, 4 not yet
    fence(controller, 1)  # the ISR is now only an adding replica
    assert _state(controller, topic_id) == ((3, 4, 1), (3,), 3, (3, 4), (1,))
    assert _reassign(controller, None) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Unable to revert partition assignment for t:0 because it would require an unclean "
        "leader election.",
    )
    set_topic_config(controller, "t", "unclean.leader.election.enable", "true")
    assert _reassign(controller, None)[0] == ErrorCode.NONE
    # replica 1 is back as the ISR, fenced: no leader until it returns
    assert _state(controller, topic_id) == ((1,), (1,), -1, (), ())
    unfence(controller, 1)
    assert part(controller, topic_id).leader == 1


def test_invalid_targets() -> None:
    controller, _ = cluster([1, 2])
    assert _reassign(controller, []) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes an empty replica list.",
    )
    assert _reassign(controller, [1, 1])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _reassign(controller, [1, 9])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _reassign(controller, [1], name="nope") == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "Unable to find a topic named nope.",
    )
    assert _reassign(controller, [1], index=3) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "Unable to find partition t:3.",
    )


def test_list_named_partitions_and_unknown_names() -> None:
    controller, _ = cluster([1, 2])
    _reassign(controller, [1, 2, 3])
    assert _list(controller, {"nope": [0], "t": [1]}).topics == []
    listed = _list(controller, {"t": [0]})
    assert [t.name for t in listed.topics] == ["t"]
    assert listed.error_code == ErrorCode.NONE


def test_completion_that_keeps_the_leader_answers_the_new_state() -> None:
    controller, topic_id = cluster([1, 2])
    _reassign(controller, [1, 3])
    before = part(controller, topic_id)
    answer = alter_isr(controller, topic_id, [1, 2, 3])
    assert answer.error_code == ErrorCode.NONE
    assert _state(controller, topic_id) == ((1, 3), (1, 3), 1, (), ())
    after = part(controller, topic_id)
    assert after.leader_epoch == before.leader_epoch + 1  # replica 2 left
    assert (answer.leader_id, answer.isr, answer.leader_epoch, answer.partition_epoch) == (
        1, [1, 3], after.leader_epoch, after.partition_epoch)  # fmt: skip


def test_a_new_target_during_a_reassignment_keeps_the_adding_replicas_in_progress() -> None:
    controller, topic_id = cluster([1, 2])
    _reassign(controller, [2, 3])
    assert _state(controller, topic_id) == ((2, 3, 1), (1, 2), 1, (3,), (1,))
    _reassign(controller, [2, 3])  # resubmitted: 3 is still being added, as in Kafka
    assert _state(controller, topic_id) == ((2, 3, 1), (1, 2), 1, (3,), (1,))
