"""Leader election rules (election.py) and unclean leader election in the pure controller."""

from __future__ import annotations

import uuid

from strom.coordinator.controller import Controller
from strom.coordinator.controller.election import (
    RECOVERED,
    RECOVERING,
    Election,
    merge,
    plan_change,
    unclean_enabled,
)
from strom.coordinator.metadata.image import NO_LEADER, PartitionImage
from tests.controller.leadership_helpers import (
    alter_isr,
    cluster,
    fence,
    part,
    set_topic_config,
    unfence,
)

TOPIC = uuid.UUID(int=7)
UNCLEAN: dict[str, str | None] = {"unclean.leader.election.enable": "true"}


def _p(replicas: list[int], isr: list[int], leader: int, recovery: int = 0) -> PartitionImage:
    return PartitionImage(
        0, tuple(replicas), tuple(isr), leader, 5, 9, leader_recovery_state=recovery
    )


def _all(_b: int) -> bool:
    return True


# --- plan_change: the rules one at a time ---------------------------------------------------


def test_nothing_to_change_plans_no_record() -> None:
    assert plan_change(TOPIC, _p([1, 2, 3], [1, 2, 3], 1), _all) is None
    assert plan_change(TOPIC, _p([1, 2, 3], [1, 2, 3], 1), _all, isr=[1, 2, 3]) is None


def test_a_valid_leader_stays_even_if_not_first() -> None:
    record = plan_change(TOPIC, _p([1, 2, 3], [1, 2, 3], 2), _all, isr=[2, 3])
    assert record is not None
    assert (record.leader, record.isr) == (-2, [2, 3])


def test_an_invalid_leader_gives_way_to_the_first_valid_replica_in_replica_order() -> None:
    record = plan_change(TOPIC, _p([1, 2, 3], [3, 2], 1), lambda b: b != 1, isr=[3, 2])
    assert record is not None
    assert record.leader == 2


def test_an_isr_of_inactive_replicas_leaves_the_partition_leaderless() -> None:
    record = plan_change(TOPIC, _p([1, 2, 3], [1], 1), lambda b: b != 1)
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state) == (NO_LEADER, None, -1)


def test_unclean_election_takes_the_first_acceptable_replica_and_marks_it_recovering() -> None:
    record = plan_change(TOPIC, _p([1, 2, 3], [1], 1), lambda b: b == 3, election=Election.UNCLEAN)
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state) == (3, [3], RECOVERING)


def test_unclean_election_prefers_a_live_isr_member() -> None:
    record = plan_change(TOPIC, _p([1, 2, 3], [1, 3], 1), lambda b: b != 1,
                         election=Election.UNCLEAN)  # fmt: skip
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state) == (3, None, -1)


def test_unclean_election_with_no_live_replica_stays_leaderless() -> None:
    record = plan_change(TOPIC, _p([1, 2], [1], 1), lambda b: False, election=Election.UNCLEAN)
    assert record is not None
    assert (record.leader, record.isr) == (NO_LEADER, None)


def test_a_recovering_partition_stays_recovering_without_a_second_write() -> None:
    p = _p([1, 2], [1], NO_LEADER, recovery=RECOVERING)
    record = plan_change(TOPIC, p, lambda b: b == 2, election=Election.UNCLEAN)
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state) == (2, [2], -1)


def test_preferred_election_moves_to_the_first_replica_only_if_valid() -> None:
    record = plan_change(TOPIC, _p([1, 2], [1, 2], 2), _all, election=Election.PREFERRED)
    assert record is not None
    assert record.leader == 1
    assert plan_change(TOPIC, _p([1, 2], [2], 2), _all, election=Election.PREFERRED) is None
    assert plan_change(TOPIC, _p([1, 2], [1, 2], 2), lambda b: b != 1,
                       election=Election.PREFERRED) is None  # fmt: skip


def test_merge_replays_like_the_metadata_delta() -> None:
    p = _p([1, 2, 3], [1], 1)
    record = plan_change(TOPIC, p, lambda b: b == 3, election=Election.UNCLEAN)
    assert record is not None
    merged = merge(p, record)
    assert (merged.leader, merged.isr, merged.leader_epoch, merged.partition_epoch) == (
        3, (3,), 6, 10)  # fmt: skip
    assert merged.leader_recovery_state == RECOVERING


# --- the topic config and the broker default ---------------------------------------------------


def test_the_topic_override_wins_over_the_broker_default() -> None:
    controller, _ = cluster([1, 2], configs=UNCLEAN)
    assert unclean_enabled(controller.image, False, "t")
    controller2, _ = cluster([1, 2], configs={"unclean.leader.election.enable": "false"})
    assert not unclean_enabled(controller2.image, True, "t")
    assert unclean_enabled(controller2.image, True, "other")


# --- fencing with and without unclean election --------------------------------------------------


def _lose_isr(
    configs: dict[str, str | None] | None = None, props: dict[str, str] | None = None
) -> tuple[Controller, uuid.UUID]:
    """Replicas [2, 3, 4], ISR shrunk to [2], then broker 2 fenced."""
    controller, topic_id = cluster([2, 3, 4], configs=configs, props=props)
    alter_isr(controller, topic_id, [2])
    fence(controller, 2)
    return controller, topic_id


def test_without_unclean_election_a_partition_whose_isr_is_gone_has_no_leader() -> None:
    controller, topic_id = _lose_isr()
    p = part(controller, topic_id)
    assert (p.leader, p.isr, p.leader_recovery_state) == (NO_LEADER, (2,), RECOVERED)


def test_with_the_topic_config_a_replica_outside_the_isr_leads_recovering() -> None:
    controller, topic_id = _lose_isr(UNCLEAN)
    p = part(controller, topic_id)
    assert (p.leader, p.isr, p.leader_recovery_state) == (3, (3,), RECOVERING)


def test_with_the_broker_default_a_replica_outside_the_isr_leads() -> None:
    controller, topic_id = _lose_isr(props={"unclean.leader.election.enable": "true"})
    p = part(controller, topic_id)
    assert (p.leader, p.isr) == (3, (3,))


def test_the_new_leader_reports_recovered_through_alter_partition() -> None:
    controller, topic_id = _lose_isr(UNCLEAN)
    answer = alter_isr(controller, topic_id, [3], recovery=RECOVERED)
    assert answer.error_code == 0
    assert answer.leader_recovery_state == RECOVERED
    assert part(controller, topic_id).leader_recovery_state == RECOVERED


def test_a_dynamic_enable_takes_effect_at_the_next_unclean_sweep() -> None:
    controller, topic_id = _lose_isr()
    assert controller.elect_unclean_leaders().response == 0
    set_topic_config(controller, "t", "unclean.leader.election.enable", "true")
    result = controller.elect_unclean_leaders()
    assert result.response == 1
    controller.replay(result.records)
    p = part(controller, topic_id)
    assert (p.leader, p.isr, p.leader_recovery_state) == (3, (3,), RECOVERING)


def test_a_dynamic_disable_stops_unclean_elections() -> None:
    controller, topic_id = cluster([2, 3, 4], configs=UNCLEAN)
    set_topic_config(controller, "t", "unclean.leader.election.enable", "false")
    alter_isr(controller, topic_id, [2])
    fence(controller, 2)
    assert part(controller, topic_id).leader == NO_LEADER
    assert controller.elect_unclean_leaders().records == []


def test_unfencing_a_replica_outside_the_isr_elects_it_only_if_unclean_is_allowed() -> None:
    controller, topic_id = cluster([2, 3], configs=None)
    alter_isr(controller, topic_id, [2])
    fence(controller, 3)
    fence(controller, 2)
    unfence(controller, 3)
    assert part(controller, topic_id).leader == NO_LEADER
    set_topic_config(controller, "t", "unclean.leader.election.enable", "true")
    fence(controller, 3)
    unfence(controller, 3)
    p = part(controller, topic_id)
    assert (p.leader, p.isr, p.leader_recovery_state) == (3, (3,), RECOVERING)


def test_unfencing_the_last_isr_member_elects_it_cleanly() -> None:
    controller, topic_id = _lose_isr()
    unfence(controller, 2)
    p = part(controller, topic_id)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), RECOVERED)


def test_the_dynamic_cluster_default_allows_unclean_elections() -> None:
    from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
    from tests.controller.helpers import commit

    controller, topic_id = _lose_isr()
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                4, "", [IncrementalAlterConfigsRequest.AlterableConfig(
                    "unclean.leader.election.enable", 0, "true")]
            )
        ]
    )  # fmt: skip
    response = commit(controller, controller.incremental_alter_configs(request, 1))
    assert response.responses[0].error_code == 0, response.responses[0].error_message
    commit(controller, controller.elect_unclean_leaders())
    assert part(controller, topic_id).leader == 3


def test_controlled_shutdown_of_the_last_isr_member_elects_uncleanly_where_allowed() -> None:
    from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
    from tests.controller.helpers import commit
    from tests.controller.leadership_helpers import BROKER_EPOCH

    for configs, expected in ((None, (NO_LEADER, (2,))), (UNCLEAN, (3, (3,)))):
        controller, topic_id = cluster([2, 3, 4], configs=configs)
        alter_isr(controller, topic_id, [2])
        request = BrokerHeartbeatRequest(
            broker_id=2, broker_epoch=BROKER_EPOCH[2], current_metadata_offset=10**6,
            want_shut_down=True,
        )  # fmt: skip
        commit(controller, controller.broker_heartbeat(request, next_offset=10**6, now_ms=0))
        p = part(controller, topic_id)
        assert (p.leader, p.isr) == expected
