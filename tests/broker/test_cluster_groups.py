"""Group coordination across brokers: FindCoordinator names the leader of the group's
`__consumer_offsets` partition, and this node coordinates only the groups whose partition it
leads (NOT_COORDINATOR otherwise), following leadership changes in the metadata image.

`__consumer_offsets` has 3 partitions: "g2" hashes to partition 0, "g0" to 1, "g1" to 2.
The other brokers are registered but never run: a group write to a partition replicated to
one of them completes only once that replica fetched it (acks=all), so the test plays that
follower (`following`) while it forms groups here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from strom.wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from strom.wire.messages.join_group import JoinGroupResponse
from strom.wire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from strom.wire.messages.offset_commit import OffsetCommitResponse
from strom.wire.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from strom.wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from tests.broker.cluster_helpers import (
    CLUSTER_OVERRIDES,
    create_placed,
    fence,
    peer_port,
    register,
    state_of,
)
from tests.broker.test_produce_helpers import fetch_request
from tests.groups.wire_helpers import commit, commit_request, form, join_request

pytestmark = pytest.mark.trio

ON_0, ON_1, ON_2 = "g2", "g0", "g1"
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {
        **CLUSTER_OVERRIDES,
        "offsets.topic.num.partitions": "3",
        "offsets.commit.timeout.ms": "1000",
    }


async def _cluster(broker: EmbeddedBroker, offsets: list[list[int]]) -> tuple[BrokerState, int]:
    state = state_of(broker)
    epoch = await register(state, 2)
    await register(state, 3)
    await create_placed(state, "__consumer_offsets", offsets)
    await create_placed(state, "t", [[1]])
    return state, epoch


@asynccontextmanager
async def following(
    broker: EmbeddedBroker, state: BrokerState, partition: int, replica: int
) -> AsyncIterator[None]:
    """Broker `replica`'s follower of `__consumer_offsets`-`partition`, played by the test: it
    keeps fetching at the leader's log end, so the coordinator's writes there complete."""
    topic = state.image.topic("__consumer_offsets")
    assert topic is not None
    client = await KafkaClient.connect(broker.bootstrap)

    async def fetch_forever() -> None:
        while True:
            log = state.logs.get("__consumer_offsets", partition)
            assert log is not None
            request = fetch_request(
                "__consumer_offsets", log.log_end_offset, partition, max_wait_ms=50
            )
            request.topics[0].topic_id = topic.topic_id
            request.replica_state = FetchRequest.ReplicaState(replica, -1)
            await client.request(request, 15, FetchResponse)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch_forever)
            yield
            nursery.cancel_scope.cancel()
    finally:
        await client.aclose()


async def _find(client: KafkaClient, group: str, version: int = 4) -> tuple[int, int, int]:
    if version >= 4:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    else:
        request = FindCoordinatorRequest(key=group)
    response = await client.request(request, version, FindCoordinatorResponse)
    if version >= 4:
        [found] = response.coordinators
        return found.error_code, found.node_id, found.port
    return response.error_code, response.node_id, response.port


@pytest.mark.parametrize("version", [0, 3, 4, 6])
async def test_find_coordinator_names_the_partition_leader(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    state, epoch_two = await _cluster(broker, [[1, 2], [2, 1], [3, 2]])
    me = broker.endpoints[0].port
    assert await _find(client, ON_0, version) == (0, 1, me)
    assert await _find(client, ON_1, version) == (0, 2, peer_port(2))
    assert await _find(client, ON_2, version) == (0, 3, peer_port(3))
    # brokers 3 and 2 fenced: partition 2 has no leader left; partition 1 moves here
    await fence(state, 3, state.image.broker(3).epoch)  # type: ignore[union-attr]
    await fence(state, 2, epoch_two)
    error, node, _ = await _find(client, ON_2, version)
    assert (error, node) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    assert await _find(client, ON_1, version) == (0, 1, me)


async def test_groups_of_partitions_led_elsewhere_are_not_coordinated(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    state, _ = await _cluster(broker, [[1, 2], [2, 1], [3, 1]])
    async with following(broker, state, 0, 2):
        joined = await form(client, ON_0)  # partition 0 is led here
        mine = commit_request(
            ON_0, "t", 5, generation=joined.generation_id, member=joined.member_id
        )
        assert (await client.request(mine, 8, OffsetCommitResponse)).topics[0].partitions[
            0
        ].error_code == 0

    group = ON_1  # led by broker 2 (this node holds a follower replica)
    join = await client.request(join_request(group), 9, JoinGroupResponse)
    assert join.error_code == NOT_COORDINATOR
    sync = SyncGroupRequest(group_id=group, generation_id=1, member_id="m")
    assert (await client.request(sync, 5, SyncGroupResponse)).error_code == NOT_COORDINATOR
    beat = HeartbeatRequest(group_id=group, generation_id=1, member_id="m")
    assert (await client.request(beat, 4, HeartbeatResponse)).error_code == NOT_COORDINATOR
    commit = await client.request(commit_request(group, "t", 1), 8, OffsetCommitResponse)
    assert commit.topics[0].partitions[0].error_code == NOT_COORDINATOR
    fetch = OffsetFetchRequest(
        groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]
    )
    fetched = await client.request(fetch, 8, OffsetFetchResponse)
    assert fetched.groups[0].error_code == NOT_COORDINATOR
    old_fetch = OffsetFetchRequest(
        group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic("t", [0])]
    )
    fetched_v1 = await client.request(old_fetch, 1, OffsetFetchResponse)
    assert fetched_v1.topics[0].partitions[0].error_code == NOT_COORDINATOR
    described = await client.request(
        DescribeGroupsRequest(groups=[group, ON_0]), 5, DescribeGroupsResponse
    )
    assert [g.error_code for g in described.groups] == [NOT_COORDINATOR, 0]
    leave = LeaveGroupRequest(group_id=group, member_id="m")
    assert (await client.request(leave, 0, LeaveGroupResponse)).error_code == NOT_COORDINATOR
    delete = await client.request(
        DeleteGroupsRequest(groups_names=[group]), 2, DeleteGroupsResponse
    )
    assert delete.results[0].error_code == NOT_COORDINATOR
    offset_delete = OffsetDeleteRequest(group_id=group)
    answer = await client.request(offset_delete, 0, OffsetDeleteResponse)
    assert answer.error_code == NOT_COORDINATOR
    # the group led here is untouched
    beat = HeartbeatRequest(
        group_id=ON_0, generation_id=joined.generation_id, member_id=joined.member_id
    )
    assert (await client.request(beat, 4, HeartbeatResponse)).error_code == 0


async def test_leadership_moves_through_the_image(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    state, epoch_two = await _cluster(broker, [[1, 2], [2, 1], [3, 1]])
    async with following(broker, state, 0, 2):
        await form(client, ON_0)
    # broker 2 is fenced: partition 1's leadership moves here, and its groups are served
    assert (
        await client.request(join_request(ON_1), 9, JoinGroupResponse)
    ).error_code == NOT_COORDINATOR
    await fence(state, 2, epoch_two)
    assert (await _find(client, ON_1))[:2] == (0, 1)
    await form(client, ON_1)
    assert state.groups is not None
    assert state.groups.owned == {0, 1}  # partition 2 stays with broker 3


async def test_losing_leadership_unloads_the_groups(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    state, _ = await _cluster(broker, [[1, 2], [2, 1], [3, 1]])
    async with following(broker, state, 0, 2):
        joined = await form(client, ON_0)
    assert state.groups is not None
    assert 0 in state.groups.owned
    # this node's broker begins a controlled shutdown: its leaderships move to broker 2
    beat = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=state.controller.broker_epoch,
        current_metadata_offset=state.image.provenance.offset,
        want_shut_down=True,
    )
    await state.controller.broker_heartbeat(beat)
    assert state.image.partition("__consumer_offsets", 0).leader == 2  # type: ignore[union-attr]
    assert 0 not in state.groups.owned
    assert ON_0 not in state.groups.machine.groups
    heartbeat = HeartbeatRequest(
        group_id=ON_0, generation_id=joined.generation_id, member_id=joined.member_id
    )
    assert (await client.request(heartbeat, 4, HeartbeatResponse)).error_code == NOT_COORDINATOR
    assert (await _find(client, ON_0))[:2] == (0, 2)


async def test_a_commit_is_answered_once_the_isr_holds_it(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    """Partition 0 is replicated to broker 2: a commit waits for broker 2's replica to fetch
    it (acks=all). Without that fetch it times out after offsets.commit.timeout.ms and is
    answered COORDINATOR_NOT_AVAILABLE, its offsets not applied; with it, it succeeds."""
    state, _ = await _cluster(broker, [[1, 2], [2, 1], [3, 1]])
    async with following(broker, state, 0, 2):
        joined = await form(client, ON_0)
    log = state.logs.get("__consumer_offsets", 0)
    assert log is not None
    end = log.log_end_offset
    assert log.high_watermark == end
    member = {"generation": joined.generation_id, "member": joined.member_id}
    unreplicated = await commit(client, ON_0, "t", 5, **member)  # type: ignore[arg-type]
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # "t" has one partition
    assert unreplicated == [ErrorCode.COORDINATOR_NOT_AVAILABLE, unknown]
    assert (log.log_end_offset, log.high_watermark) == (end + 1, end)  # written, not committed
    assert await _committed(client, ON_0) == [-1, -1]
    async with following(broker, state, 0, 2):
        assert await commit(client, ON_0, "t", 7, **member) == [0, unknown]  # type: ignore[arg-type]
    assert log.high_watermark == log.log_end_offset == end + 2
    assert await _committed(client, ON_0) == [7, -1]


async def _committed(client: KafkaClient, group: str) -> list[int]:
    request = OffsetFetchRequest(
        group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic("t", [0, 1])]
    )
    response = await client.request(request, 1, OffsetFetchResponse)
    return [int(p.committed_offset) for p in response.topics[0].partitions]
