"""The group APIs over the wire, at every version, against an in-process broker."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.client import KafkaClient
from broker.embedded import EmbeddedBroker, open_broker
from broker.topics import CONSUMER_OFFSETS
from tests.groups.wire_helpers import commit, create_topic, form, join, join_request
from wire.errors import ErrorCode
from wire.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from wire.messages.join_group import JoinGroupResponse
from wire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from wire.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from wire.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse

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
            (c.key, c.node_id, c.host, c.port, c.error_code) for c in response.coordinators
        ] == [
            ("a", 1, host, int(port), 0),
            ("b", 1, host, int(port), 0),
        ]
    else:
        response = await client.request(
            FindCoordinatorRequest(key="a"), version, FindCoordinatorResponse
        )
        assert (response.error_code, response.node_id, response.host, response.port) == (
            0, 1, host, int(port),
        )  # fmt: skip
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


async def test_second_member_is_parked_until_the_first_rejoins(broker: EmbeddedBroker) -> None:
    a = await KafkaClient.connect(broker.bootstrap)
    b = await KafkaClient.connect(broker.bootstrap)
    first = await form(a, "g")
    results: list[JoinGroupResponse] = []

    async def join_b() -> None:
        results.append(await join(b, "g"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join_b)
        heartbeat = HeartbeatRequest(
            group_id="g", generation_id=first.generation_id, member_id=first.member_id
        )
        for _ in range(500):  # until b's join has started a rebalance
            if (await a.request(heartbeat, 4, HeartbeatResponse)).error_code:
                break
            await trio.sleep(0.01)
        rejoined = await a.request(join_request("g", first.member_id), 9, JoinGroupResponse)
    assert rejoined.generation_id == results[0].generation_id == first.generation_id + 1
    assert len(rejoined.members) == 2
    await a.aclose()
    await b.aclose()


@pytest.mark.parametrize("version", range(2, 10))
async def test_commit_and_fetch_every_version(client: KafkaClient, version: int) -> None:
    await create_topic(client, "t")
    assert await commit(client, "g", "t", 10, version) == [0, 0]
    assert await commit(client, "g", "nope", 10, version) == [3, 3]  # UNKNOWN_TOPIC_OR_PARTITION
    for fetch_version in ([1, 2, 5, 6, 7] if version == 9 else []) + [min(version, 9)]:
        if fetch_version >= 8:
            request = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequest.OffsetFetchRequestGroup(
                        group_id="g",
                        topics=[
                            OffsetFetchRequest.OffsetFetchRequestTopics(
                                name="t", partition_indexes=[0, 1, 2]
                            )
                        ],
                    ),
                    OffsetFetchRequest.OffsetFetchRequestGroup(group_id="other", topics=None),
                ],
                require_stable=True,
            )
            response = await client.request(request, fetch_version, OffsetFetchResponse)
            [g, other] = response.groups
            assert [(p.partition_index, p.committed_offset, p.metadata) for p in g.topics[0].partitions] == [
                (0, 10, "md"), (1, 11, "md"), (2, -1, ""),
            ]  # fmt: skip
            assert (other.group_id, other.topics, other.error_code) == ("other", [], 0)
        else:
            request = OffsetFetchRequest(
                group_id="g",
                topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(
                        name="t", partition_indexes=[0, 1, 2]
                    )
                ],
            )
            response = await client.request(request, fetch_version, OffsetFetchResponse)
            assert [(p.partition_index, p.committed_offset) for p in response.topics[0].partitions] == [
                (0, 10), (1, 11), (2, -1),
            ]  # fmt: skip
            if fetch_version >= 2:
                everything = await client.request(
                    OffsetFetchRequest(group_id="g", topics=None),
                    fetch_version,
                    OffsetFetchResponse,
                )
                assert [(t.name, len(t.partitions)) for t in everything.topics] == [("t", 2)]


async def test_member_commit_checks_generation(client: KafkaClient) -> None:
    await create_topic(client, "t")
    joined = await form(client, "g")
    gen, member = joined.generation_id, joined.member_id
    assert await commit(client, "g", "t", 1, generation=gen, member=member) == [0, 0]
    assert await commit(client, "g", "t", 1, generation=gen + 1, member=member) == [22, 22]
    assert await commit(client, "g", "t", 1) == [25, 25]  # simple commit to an active group
    assert await commit(client, "missing", "t", 1, generation=3, member="m") == [69, 69]
    assert await commit(client, "missing", "t", 1, 8, generation=3, member="m") == [22, 22]


@pytest.mark.parametrize("version", range(6))
async def test_list_groups_every_version(client: KafkaClient, version: int) -> None:
    await create_topic(client, "t")
    await commit(client, "simple", "t", 1)
    await form(client, "active")
    request = ListGroupsRequest(states_filter=["STABLE"] if version >= 4 else [])
    response = await client.request(request, version, ListGroupsResponse)
    listed = {(g.group_id, g.protocol_type) for g in response.groups}
    if version >= 4:
        assert listed == {("active", "consumer")}
        assert response.groups[0].group_state == "Stable"
    else:
        assert listed == {("simple", ""), ("active", "consumer")}
    if version >= 5:
        assert response.groups[0].group_type == "classic"


@pytest.mark.parametrize("version", range(7))
async def test_describe_groups_every_version(client: KafkaClient, version: int) -> None:
    joined = await form(client, "g", b"the-assignment")
    request = DescribeGroupsRequest(
        groups=["g", "missing"], include_authorized_operations=version >= 3
    )
    response = await client.request(request, version, DescribeGroupsResponse)
    found, missing = response.groups
    assert (found.error_code, found.group_state, found.protocol_type, found.protocol_data) == (
        0, "Stable", "consumer", "range",
    )  # fmt: skip
    [member] = found.members
    assert member.member_id == joined.member_id
    assert member.client_id == "strom-client"
    assert member.client_host == "/127.0.0.1"
    assert bytes(member.member_assignment) == b"the-assignment"
    assert bytes(member.member_metadata) == b"meta"
    if version >= 3:
        assert found.authorized_operations == (1 << 3) | (1 << 8) | (1 << 6)
    if version >= 6:
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    else:
        assert (missing.error_code, missing.group_state, missing.members) == (0, "Dead", [])


@pytest.mark.parametrize("version", range(3))
async def test_delete_groups_every_version(client: KafkaClient, version: int) -> None:
    await create_topic(client, "t")
    await commit(client, "simple", "t", 1)
    await form(client, "active")
    request = DeleteGroupsRequest(groups_names=["simple", "active", "missing"])
    response = await client.request(request, version, DeleteGroupsResponse)
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("simple", 0),
        ("active", ErrorCode.NON_EMPTY_GROUP),
        ("missing", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    fetched = await client.request(
        OffsetFetchRequest(group_id="simple", topics=None), 7, OffsetFetchResponse
    )
    assert fetched.topics == []


async def test_offset_delete(client: KafkaClient) -> None:
    await create_topic(client, "t")
    await commit(client, "g", "t", 1)
    request = OffsetDeleteRequest(
        group_id="g",
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=name, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(0)]
            )
            for name in ("t", "nope")
        ],
    )
    response = await client.request(request, 0, OffsetDeleteResponse)
    assert response.error_code == 0
    assert [(t.name, [p.error_code for p in t.partitions]) for t in response.topics] == [
        ("t", [0]),
        ("nope", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]),
    ]
    request.group_id = "missing"
    assert (await client.request(request, 0, OffsetDeleteResponse)).error_code == 69


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
    assert again.leader == again.member_id
    assert again.skip_assignment == (version >= 9)
    assert len(again.members) == (1 if version >= 9 else 0)
