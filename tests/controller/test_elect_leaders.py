"""ElectLeaders (API 43) and the automatic preferred-leader rebalance in the pure controller."""

from __future__ import annotations

from strom.coordinator.controller import Controller
from strom.coordinator.controller.leadership import PREFERRED, UNCLEAN
from strom.coordinator.metadata.image import NO_LEADER
from strom.wire.errors import ErrorCode
from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from tests.controller.helpers import commit, create, topic
from tests.controller.leadership_helpers import alter_isr, cluster, fence, part, unfence


def _elect(
    controller: Controller,
    election_type: int,
    partitions: dict[str, list[int]] | None,
    version: int = 2,
) -> ElectLeadersResponse:
    request = ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [ElectLeadersRequest.TopicPartitions(t, ps) for t, ps in partitions.items()],
    )
    return commit(controller, controller.elect_leaders(request, version))


def _codes(response: ElectLeadersResponse) -> dict[tuple[str, int], int]:
    return {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    controller, topic_id = cluster([2, 3])
    fence(controller, 2)
    unfence(controller, 2)
    alter_isr(controller, topic_id, [3, 2])
    before = part(controller, topic_id)
    response = _elect(controller, PREFERRED, {"t": [0]})
    assert _codes(response) == {("t", 0): ErrorCode.NONE}
    after = part(controller, topic_id)
    assert (after.leader, after.leader_epoch) == (2, before.leader_epoch + 1)


def test_preferred_election_not_needed_when_the_first_replica_leads() -> None:
    controller, _ = cluster([2, 3])
    response = _elect(controller, PREFERRED, {"t": [0]})
    assert _codes(response) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
    assert response.replica_election_results[0].partition_result[0].error_message is None


def test_preferred_leader_not_available_outside_the_isr_or_fenced() -> None:
    controller, topic_id = cluster([2, 3])
    fence(controller, 2)
    response = _elect(controller, PREFERRED, {"t": [0]})
    assert _codes(response) == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    unfence(controller, 2)  # back, but not in the ISR until the leader adds it
    assert part(controller, topic_id).isr == (3,)
    response = _elect(controller, PREFERRED, {"t": [0]})
    assert _codes(response) == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}


def test_unknown_topics_and_partitions() -> None:
    controller, _ = cluster([2, 3])
    response = _elect(controller, PREFERRED, {"nope": [0], "t": [5]})
    assert _codes(response) == {
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    messages = [r.partition_result[0].error_message for r in response.replica_election_results]
    assert messages == ["No such topic as nope", "No such partition as t-5"]


def test_unclean_election_elects_outside_the_isr_whatever_the_config() -> None:
    controller, topic_id = cluster([2, 3])
    alter_isr(controller, topic_id, [2])
    fence(controller, 2)
    assert part(controller, topic_id).leader == NO_LEADER
    response = _elect(controller, UNCLEAN, {"t": [0]})
    assert _codes(response) == {("t", 0): ErrorCode.NONE}
    after = part(controller, topic_id)
    assert (after.leader, after.isr, after.leader_recovery_state) == (3, (3,), 1)


def test_unclean_election_not_needed_with_a_leader_and_impossible_without_replicas() -> None:
    controller, topic_id = cluster([2, 3])
    assert _codes(_elect(controller, UNCLEAN, {"t": [0]})) == {
        ("t", 0): ErrorCode.ELECTION_NOT_NEEDED
    }
    fence(controller, 3)
    fence(controller, 2)
    assert part(controller, topic_id).leader == NO_LEADER
    assert _codes(_elect(controller, UNCLEAN, {"t": [0]})) == {
        ("t", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    }


def test_all_partitions_leaves_out_those_that_need_no_election() -> None:
    controller, topic_id = cluster([2, 3])
    create(controller, topic("u", partitions=-1, replication=-1, assignments=[(0, [3, 2])]))
    fence(controller, 2)
    unfence(controller, 2)
    alter_isr(controller, topic_id, [3, 2])
    response = _elect(controller, PREFERRED, None)
    assert _codes(response) == {("t", 0): ErrorCode.NONE}
    # every topic has an entry, the balanced one an empty one (as Kafka's controller answers)
    assert [r.topic for r in response.replica_election_results] == ["t", "u"]


def test_a_topic_named_twice_gets_two_entries() -> None:
    controller, _ = cluster([2, 3])
    request = ElectLeadersRequest(
        election_type=PREFERRED,
        topic_partitions=[
            ElectLeadersRequest.TopicPartitions("t", [0]),
            ElectLeadersRequest.TopicPartitions("t", [0]),
        ],
    )
    response = commit(controller, controller.elect_leaders(request, 2))
    assert [r.topic for r in response.replica_election_results] == ["t", "t"]


def test_version_0_is_always_preferred() -> None:
    controller, _ = cluster([2, 3])
    response = _elect(controller, UNCLEAN, {"t": [0]}, version=0)
    assert _codes(response) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}


def test_an_unknown_election_type_is_refused() -> None:
    controller, _ = cluster([2, 3])
    response = _elect(controller, 7, {"t": [0]})
    assert response.error_code == ErrorCode.INVALID_REQUEST
    [result] = response.replica_election_results[0].partition_result
    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Unknown election type 7",
    )


def test_the_same_partition_twice_elects_once() -> None:
    controller, topic_id = cluster([2, 3])
    fence(controller, 2)
    unfence(controller, 2)
    alter_isr(controller, topic_id, [3, 2])
    result = controller.elect_leaders(
        ElectLeadersRequest(election_type=PREFERRED,
                            topic_partitions=[ElectLeadersRequest.TopicPartitions("t", [0, 0])]),
        2,
    )  # fmt: skip
    assert len(result.records) == 1
    codes = [p.error_code for p in result.response.replica_election_results[0].partition_result]
    assert codes == [ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED]


# --- auto.leader.rebalance.enable ------------------------------------------------------------


def test_balance_moves_leaders_back_when_the_preferred_replica_is_in_sync() -> None:
    controller, topic_id = cluster([2, 3])
    fence(controller, 2)
    unfence(controller, 2)
    assert controller.leaders_imbalanced()
    assert controller.balance_leaders().records == []  # 2 is not in the ISR yet
    alter_isr(controller, topic_id, [3, 2])
    result = controller.balance_leaders()
    assert result.response is False
    commit(controller, result)
    assert part(controller, topic_id).leader == 2
    assert not controller.leaders_imbalanced()


def test_balance_is_capped_per_pass() -> None:
    from strom.coordinator.controller.leadership import balance_leaders

    controller, topic_id = cluster([2, 3])
    create(controller, topic("u", partitions=-1, replication=-1, assignments=[(0, [2, 3])]))
    fence(controller, 2)
    unfence(controller, 2)
    alter_isr(controller, topic_id, [3, 2])
    capped = balance_leaders(controller.image, limit=1)
    assert (capped.response, len(capped.records)) == (True, 1)
