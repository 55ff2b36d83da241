"""The offset and admin group APIs over the wire, at every version, in-process."""

from __future__ import annotations

import pytest

from strom.broker.drivers.topics import CONSUMER_OFFSETS
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.coordinator.groups.records import partition_for
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from strom.wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from strom.wire.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from strom.wire.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from tests.groups.wire_helpers import commit, create_topic, form

pytestmark = pytest.mark.trio


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


async def test_commit_to_an_offline_partition_is_not_coordinator(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit whose write fails is answered with Kafka's mapping and changes nothing."""
    await create_topic(client, "t")
    assert await commit(client, "g", "t", 1) == [0, 0]
    state = broker.broker.state
    assert state is not None
    offline = state.logs.get(CONSUMER_OFFSETS, partition_for("g", 5))
    assert offline is not None
    monkeypatch.setattr(offline, "failed", "EIO (injected)")  # as after a failed disk write
    errors = await commit(client, "g", "t", 10)
    assert errors == [ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR]
    fetched = await client.request(
        OffsetFetchRequest(group_id="g", topics=None), 7, OffsetFetchResponse
    )
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [1, 2]


async def test_describe_keeps_the_assignment_while_rebalancing(client: KafkaClient) -> None:
    """Outside Stable, Kafka 4.1 describes members without metadata but with their last
    assignment (found by differential testing)."""
    from strom.wire.messages.join_group import JoinGroupResponse
    from tests.groups.wire_helpers import join_request

    joined = await form(client, "g", b"the-assignment")
    rejoined = await client.request(
        join_request("g", joined.member_id), 9, JoinGroupResponse
    )  # the leader rejoins: a new generation waits for its SyncGroup
    assert (rejoined.error_code, rejoined.generation_id) == (0, joined.generation_id + 1)
    response = await client.request(DescribeGroupsRequest(groups=["g"]), 5, DescribeGroupsResponse)
    [group] = response.groups
    assert (group.group_state, group.protocol_data) == ("CompletingRebalance", "")
    [member] = group.members
    assert bytes(member.member_metadata) == b""
    assert bytes(member.member_assignment) == b"the-assignment"


@pytest.mark.parametrize(
    "broker_overrides",
    [{"offsets.topic.num.partitions": "5", "log.flush.interval.messages": "1"}],
)
async def test_flush_messages_one_fsyncs_a_commit_before_the_ack(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    """With flush.messages=1 an acknowledged offset commit is on disk: the group
    coordinator's append is fsynced before it is answered, as a produce's is (found by the
    simulation, seed 2979: a whole-cluster power cut lost an acknowledged commit that only
    the page cache of the replica elected afterwards had held). The log manager's background
    flush is kept out of it, so only the append's own flush can pass."""
    await create_topic(client, "t")
    assert await commit(client, "g", "t", 1) == [0, 0]  # __consumer_offsets exists now
    state = broker.broker.state
    assert state is not None
    log = state.logs.get(CONSUMER_OFFSETS, partition_for("g", 5))
    assert log is not None
    log.on_flush_wanted = None
    for i in range(3):
        assert await commit(client, "g", "t", 10 + i) == [0, 0]
        assert log.recovery_point == log.log_end_offset
