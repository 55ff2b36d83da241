"""The group APIs over the wire, at every version, against an in-process broker."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from strom.broker.drivers.topics import CONSUMER_OFFSETS
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from strom.wire.messages.join_group import JoinGroupResponse
from strom.wire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from strom.wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from tests.groups.wire_helpers import commit, create_topic, form, join, join_request

pytestmark = pytest.mark.trio


@pytest.mark.parametrize("version", range(7))
async def test_find_coordinator_every_version(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    if version >= 4:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
        response = await client.request(request, version, FindCoordinatorResponse)
        assert [
            (c.key, c.node_id, c.host, c.port, c.error_code, c.error_message)
            for c in response.coordinators
        ] == [
            ("a", 1, host, int(port), 0, ""),  # Kafka 4.1: "" here, "NONE" before v4
            ("b", 1, host, int(port), 0, ""),
        ]
    else:
        response = await client.request(
            FindCoordinatorRequest(key="a"), version, FindCoordinatorResponse
        )
        assert (response.error_code, response.node_id, response.host, response.port) == (
            0, 1, host, int(port),
        )  # fmt: skip
        assert response.error_message == ("NONE" if version >= 1 else "")
    state = broker.broker.state
    assert state is not None
    topic = state.image.topic(CONSUMER_OFFSETS)
    assert topic is not None
    assert len(topic.partitions) == 5
    assert state.image.topic_config_overrides(CONSUMER_OFFSETS)["cleanup.policy"] == "compact"


async def test_find_coordinator_transaction_and_bad_key_types(client: KafkaClient) -> None:
    txn = await client.request(
        FindCoordinatorRequest(key="tx", key_type=1), 3, FindCoordinatorResponse
    )
    assert txn.error_code == ErrorCode.NONE
    bad = await client.request(
        FindCoordinatorRequest(key_type=2, coordinator_keys=["g:x:0"]), 6, FindCoordinatorResponse
    )
    assert bad.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", range(2, 10))
async def test_join_every_version(client: KafkaClient, version: int) -> None:
    first = await client.request(join_request("g"), version, JoinGroupResponse)
    if version >= 4:
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        first = await client.request(join_request("g", first.member_id), version, JoinGroupResponse)
    assert first.error_code == ErrorCode.NONE
    assert first.generation_id == 1
    assert first.leader == first.member_id
    assert first.protocol_name == "range"
    assert [(m.member_id, bytes(m.metadata)) for m in first.members] == [(first.member_id, b"meta")]
    if version >= 7:
        assert first.protocol_type == "consumer"


@pytest.mark.parametrize("version", range(6))
async def test_sync_heartbeat_leave_every_version(client: KafkaClient, version: int) -> None:
    joined = await join(client, "g")
    sync = SyncGroupRequest(
        group_id="g",
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        protocol_type="consumer" if version >= 5 else None,
        protocol_name="range" if version >= 5 else None,
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"x")
        ],
    )
    synced = await client.request(sync, version, SyncGroupResponse)
    assert (synced.error_code, bytes(synced.assignment)) == (0, b"x")
    if version >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    heartbeat = HeartbeatRequest(
        group_id="g", generation_id=joined.generation_id, member_id=joined.member_id
    )
    hb = await client.request(heartbeat, min(version, 4), HeartbeatResponse)
    assert hb.error_code == 0
    stale = HeartbeatRequest(group_id="g", generation_id=99, member_id=joined.member_id)
    hb = await client.request(stale, min(version, 4), HeartbeatResponse)
    assert hb.error_code == ErrorCode.ILLEGAL_GENERATION
    if version >= 3:
        leave = LeaveGroupRequest(
            group_id="g",
            members=[
                LeaveGroupRequest.MemberIdentity(member_id=joined.member_id),
                LeaveGroupRequest.MemberIdentity(member_id="ghost"),
            ],
        )
        left = await client.request(leave, version, LeaveGroupResponse)
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [
            (joined.member_id, 0),
            ("ghost", ErrorCode.UNKNOWN_MEMBER_ID),
        ]
    else:
        leave = LeaveGroupRequest(group_id="g", member_id=joined.member_id)
        assert (await client.request(leave, version, LeaveGroupResponse)).error_code == 0
        again = await client.request(leave, version, LeaveGroupResponse)
        assert again.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def heartbeat_until_rebalance(client: KafkaClient, member: JoinGroupResponse) -> None:
    """Heartbeat as `member` until the coordinator answers REBALANCE_IN_PROGRESS; fail otherwise."""
    heartbeat = HeartbeatRequest(
        group_id="g", generation_id=member.generation_id, member_id=member.member_id
    )
    with trio.fail_after(10):
        while True:
            error = (await client.request(heartbeat, 4, HeartbeatResponse)).error_code
            if error != ErrorCode.NONE:
                assert error == ErrorCode.REBALANCE_IN_PROGRESS
                return
            await trio.sleep(0.01)


async def test_second_member_is_parked_until_the_first_rejoins(broker: EmbeddedBroker) -> None:
    a = await KafkaClient.connect(broker.bootstrap)
    b = await KafkaClient.connect(broker.bootstrap)
    first = await form(a, "g")
    results: list[JoinGroupResponse] = []

    async def join_b() -> None:
        results.append(await join(b, "g"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join_b)
        await heartbeat_until_rebalance(a, first)  # b's join has started a rebalance
        rejoined = await a.request(join_request("g", first.member_id), 9, JoinGroupResponse)
    assert rejoined.generation_id == results[0].generation_id == first.generation_id + 1
    assert len(rejoined.members) == 2
    await a.aclose()
    await b.aclose()


def _started(broker: EmbeddedBroker) -> tuple[bool, bool]:
    """Whether the broker's group and transaction coordinators have started."""
    state = broker.broker.state
    assert state is not None
    return state.groups is not None, state.transactions is not None


async def test_the_coordinators_start_on_first_need_and_before_serving_after_a_restart(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    async with open_broker(data) as broker:
        assert _started(broker) == (False, False)  # a fresh node starts neither
        client = await KafkaClient.connect(broker.bootstrap)
        await create_topic(client, "t")
        assert _started(broker) == (False, False)  # a topic of its own needs no coordinator
        found = await client.request(FindCoordinatorRequest(key="g"), 3, FindCoordinatorResponse)
        assert found.error_code == ErrorCode.NONE
        assert _started(broker) == (True, False)  # the first request that asks starts it
        assert await commit(client, "g", "t", 5) == [0, 0]
        await client.aclose()
    async with open_broker(data) as broker:
        # it leads __consumer_offsets: started, and every partition loaded, before serving
        assert _started(broker) == (True, False)
        state = broker.broker.state
        assert state is not None
        assert state.groups is not None
        assert state.groups.owned


async def test_groups_and_offsets_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with open_broker(data) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        await create_topic(client, "t")
        joined = await form(client, "g", b"kept")
        assert await commit(
            client, "g", "t", 5, generation=joined.generation_id, member=joined.member_id
        ) == [0, 0]
        await commit(client, "simple", "t", 7)
        await client.aclose()
    async with open_broker(data) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        heartbeat = HeartbeatRequest(
            group_id="g", generation_id=joined.generation_id, member_id=joined.member_id
        )
        assert (await client.request(heartbeat, 4, HeartbeatResponse)).error_code == 0
        for group, offset in (("g", 5), ("simple", 7)):
            fetched = await client.request(
                OffsetFetchRequest(group_id=group, topics=None), 7, OffsetFetchResponse
            )
            assert [(p.partition_index, p.committed_offset) for p in fetched.topics[0].partitions] == [
                (0, offset), (1, offset + 1),
            ]  # fmt: skip
        described = await client.request(
            DescribeGroupsRequest(groups=["g"]), 5, DescribeGroupsResponse
        )
        assert bytes(described.groups[0].members[0].member_assignment) == b"kept"
        await client.aclose()


@pytest.mark.parametrize("version", [5, 8, 9])
async def test_static_leader_rejoin_in_stable(client: KafkaClient, version: int) -> None:
    """A restarted static leader gets its generation back; skip_assignment only exists in v9."""
    first = await join(client, "g", version, instance="inst")
    sync = SyncGroupRequest(
        group_id="g",
        generation_id=first.generation_id,
        member_id=first.member_id,
        group_instance_id="inst",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(first.member_id, b"mine")],
    )
    assert (await client.request(sync, 3, SyncGroupResponse)).error_code == 0
    again = await client.request(join_request("g", instance="inst"), version, JoinGroupResponse)
    assert again.error_code == 0
    assert again.generation_id == first.generation_id
    assert again.member_id != first.member_id
    assert again.leader == (again.member_id if version >= 9 else first.member_id)
    assert again.skip_assignment == (version >= 9)
    assert len(again.members) == (1 if version >= 9 else 0)


async def test_parked_join_is_released_at_shutdown(tmp_path: Path) -> None:
    """A resigning coordinator answers parked JoinGroups with NOT_COORDINATOR, as Kafka's does."""
    async with open_broker(tmp_path / "data") as broker:
        a = await KafkaClient.connect(broker.bootstrap)
        b = await KafkaClient.connect(broker.bootstrap)
        first = await form(a, "g")
        answers: list[JoinGroupResponse] = []

        async def join_b() -> None:
            request = join_request("g")
            response = await b.request(request, 9, JoinGroupResponse)
            request.member_id = response.member_id
            answers.append(await b.request(request, 9, JoinGroupResponse))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(join_b)
            await heartbeat_until_rebalance(a, first)  # b waits in the join phase
            broker.broker.shutdown()
        assert [r.error_code for r in answers] == [ErrorCode.NOT_COORDINATOR]
        await a.aclose()
        await b.aclose()
