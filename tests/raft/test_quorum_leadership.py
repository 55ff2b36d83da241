"""ElectLeaders, partition reassignment and the leadership check on a three-voter quorum: the
active controller runs them and every node applies the result; the others answer NOT_CONTROLLER."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest as Reassign,
)
from strom.wire.messages.create_topics import CreateTopicsRequest
from strom.wire.messages.elect_leaders import ElectLeadersRequest
from strom.wire.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from tests.raft.test_quorum_controller import cluster

pytestmark = pytest.mark.trio


def _topic(name: str, replicas: list[int]) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name, -1, -1, [CreateTopicsRequest.CreatableReplicaAssignment(0, replicas)]
            )
        ]
    )


def _elect(name: str) -> ElectLeadersRequest:
    return ElectLeadersRequest(
        election_type=0, topic_partitions=[ElectLeadersRequest.TopicPartitions(name, [0])]
    )


def _reassign(name: str, replicas: list[int] | None) -> Reassign:
    return Reassign(
        topics=[Reassign.ReassignableTopic(name, [Reassign.ReassignablePartition(0, replicas)])]
    )


async def test_the_active_controller_elects_and_reassigns_and_every_node_follows(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path) as c:
        active = await c.active()
        await c.until(lambda: all(n.image.metadata_version > 0 for n in c.running()))
        await c.register_all()
        follower = next(n for n in c.running() if n is not active)
        created = await active.create_topics(_topic("q", [1, 2]), 7)
        assert created.topics[0].error_code == ErrorCode.NONE

        elected = await active.elect_leaders(_elect("q"), 2)
        codes = [p.error_code for p in elected.replica_election_results[0].partition_result]
        assert codes == [ErrorCode.ELECTION_NOT_NEEDED]

        refused = await follower.elect_leaders(_elect("q"), 2)
        assert refused.error_code == ErrorCode.NOT_CONTROLLER
        [result] = refused.replica_election_results[0].partition_result
        assert result.error_code == ErrorCode.NOT_CONTROLLER

        moved = await active.alter_partition_reassignments(_reassign("q", [1, 2, 3]), 0)
        assert moved.responses[0].partitions[0].error_code == ErrorCode.NONE
        await c.until(
            lambda: all(
                (p := n.image.partition("q", 0)) is not None and p.adding_replicas == (3,)
                for n in c.running()
            )
        )
        listed = await active.list_partition_reassignments(ListPartitionReassignmentsRequest(), 0)
        assert [(t.name, [p.adding_replicas for p in t.partitions]) for t in listed.topics] == [
            ("q", [[3]])
        ]
        not_here = await follower.list_partition_reassignments(
            ListPartitionReassignmentsRequest(), 0
        )
        assert (not_here.error_code, not_here.topics) == (ErrorCode.NOT_CONTROLLER, [])
        refused_move = await follower.alter_partition_reassignments(_reassign("q", None), 0)
        assert refused_move.responses[0].partitions[0].error_code == ErrorCode.NOT_CONTROLLER

        # the leadership check changes nothing on a balanced cluster, and nothing off the leader
        before = active.image
        await active.check_leadership()
        await follower.check_leadership()
        assert active.image.partition("q", 0) == before.partition("q", 0)
