"""What a broker serves when the metadata image holds several brokers (issue 11).

Brokers 2 and 3 register with the node's controller but run nowhere; topics are placed on
them. Node 1 keeps logs only for the partitions it has a replica of (a follower replica's log
too), serves only those it leads, answers NOT_LEADER_OR_FOLLOWER for the others and
UNKNOWN_TOPIC_OR_PARTITION only for partitions that do not exist, as Kafka's
ReplicaManager does. Metadata and DescribeCluster list every unfenced broker on the request's
listener and report an unfenced broker as controller.
"""

from __future__ import annotations

from collections.abc import Set
from pathlib import Path

import pytest
import trio

from strom.broker.replication.partitions import ImageFollower, follow_image, touched_topics
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.fence_broker_record import FenceBrokerRecord
from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
from strom.wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from strom.wire.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from strom.wire.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from strom.wire.messages.fetch import FetchResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from strom.wire.messages.produce import ProduceResponse
from tests.broker.cluster_helpers import (
    CLUSTER_OVERRIDES,
    create_placed,
    fence,
    peer_port,
    register,
    state_of,
)
from tests.broker.test_produce_helpers import batch, fetch_request, produce, produce_request

pytestmark = pytest.mark.trio

NLOF = ErrorCode.NOT_LEADER_OR_FOLLOWER
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
PLACED = [[2, 3], [2, 1], [1, 2], [3, 2]]
"""Partition 0: on brokers 2 and 3; 1: led by 2, a follower here; 2: led here; 3: on 3 and 2."""


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return dict(CLUSTER_OVERRIDES)


@pytest.fixture
async def cluster(broker: EmbeddedBroker) -> BrokerState:
    state = state_of(broker)
    await register(state, 2, rack="r2")
    await register(state, 3, rack="r3")
    await create_placed(state, "placed", PLACED)
    return state


async def test_logs_only_for_local_replicas(cluster: BrokerState) -> None:
    assert [cluster.logs.get("placed", p) is not None for p in range(4)] == [
        False, True, True, False,
    ]  # fmt: skip


async def test_a_replica_that_moves_away_loses_its_log(cluster: BrokerState) -> None:
    topic = cluster.image.topic("placed")
    assert topic is not None
    # partition 2 moves to brokers 2 and 3 (as a reassignment would leave it); 0 moves here
    moved = cluster.image.apply_all(
        [
            PartitionChangeRecord(
                partition_id=2, topic_id=topic.topic_id, replicas=[2, 3], isr=[2, 3], leader=2
            ),
            PartitionChangeRecord(
                partition_id=0, topic_id=topic.topic_id, replicas=[2, 1], isr=[2, 1], leader=2
            ),
        ]
    )
    await follow_image(cluster, cluster.replication, moved)
    assert cluster.logs.get("placed", 2) is None
    assert cluster.logs.get("placed", 0) is not None  # a new follower replica's log


async def _produce_all(client: KafkaClient) -> list[int]:
    """acks=1: partition 2's follower (broker 2) runs nowhere, so acks=all would wait for it
    (tests/broker/test_replication_leader.py)."""
    return [
        (await produce(client, "placed", batch(), partition=p, acks=1)).error_code
        for p in range(5)
    ]


async def test_produce(cluster: BrokerState, client: KafkaClient) -> None:
    assert await _produce_all(client) == [NLOF, NLOF, ErrorCode.NONE, NLOF, UNKNOWN]


@pytest.mark.parametrize("version", [10, 11, 12])
async def test_fetch(cluster: BrokerState, client: KafkaClient, version: int) -> None:
    """A follower replica (partition 1) serves consumers' Fetch v11+ only (KIP-392)."""
    request = fetch_request("placed", 0)
    request.topics[0].partitions = [
        fetch_request("placed", 0, partition=p).topics[0].partitions[0] for p in range(5)
    ]
    response = await client.request(request, version, FetchResponse)
    [topic] = response.responses
    follower = NLOF if version < 11 else ErrorCode.NONE
    assert [p.error_code for p in topic.partitions] == [NLOF, follower, 0, NLOF, UNKNOWN]


async def test_list_offsets(cluster: BrokerState, client: KafkaClient) -> None:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                "placed",
                [
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-1)
                    for p in range(5)
                ],
            )
        ],
    )
    response = await client.request(request, 7, ListOffsetsResponse)
    assert [p.error_code for p in response.topics[0].partitions] == [NLOF, NLOF, 0, NLOF, UNKNOWN]


@pytest.mark.parametrize("current_epoch", [-1, 0, 7])
async def test_offset_for_leader_epoch(
    cluster: BrokerState, client: KafkaClient, current_epoch: int
) -> None:
    """A partition with no replica here is NOT_LEADER_OR_FOLLOWER whatever the client's epoch
    (Kafka answers before the epoch check); a follower replica checks the epoch first."""
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                "placed",
                [
                    OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                        partition=p, current_leader_epoch=current_epoch, leader_epoch=0
                    )
                    for p in range(5)
                ],
            )
        ],
    )
    response = await client.request(request, 4, OffsetForLeaderEpochResponse)
    codes = [p.error_code for p in response.topics[0].partitions]
    epoch_error = {-1: NLOF, 0: NLOF, 7: ErrorCode.UNKNOWN_LEADER_EPOCH}[current_epoch]
    led = {-1: 0, 0: 0, 7: ErrorCode.UNKNOWN_LEADER_EPOCH}[current_epoch]
    assert codes == [NLOF, epoch_error, led, NLOF, UNKNOWN]


async def test_delete_records(cluster: BrokerState, client: KafkaClient) -> None:
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                "placed", [DeleteRecordsRequest.DeleteRecordsPartition(p, 0) for p in range(5)]
            )
        ],
        timeout_ms=200,
    )
    response = await client.request(request, 2, DeleteRecordsResponse)
    # the partition led here waits for its follower (broker 2, which never fetches in this
    # test) to report the new log start, as Kafka's DelayedDeleteRecords does
    timed_out = ErrorCode.REQUEST_TIMED_OUT
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [NLOF, NLOF, timed_out, NLOF, UNKNOWN]


async def test_describe_producers(cluster: BrokerState, client: KafkaClient) -> None:
    request = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest("placed", list(range(5)))]
    )
    response = await client.request(request, 0, DescribeProducersResponse)
    assert [p.error_code for p in response.topics[0].partitions] == [NLOF, NLOF, 0, NLOF, UNKNOWN]


async def test_metadata_lists_every_broker_and_leader(
    broker: EmbeddedBroker, cluster: BrokerState, client: KafkaClient
) -> None:
    for version in range(14):
        wanted: list[MetadataRequest.MetadataRequestTopic] | None = None if version else []
        response = await client.request(MetadataRequest(topics=wanted), version, MetadataResponse)
        brokers = [(b.node_id, b.port, b.rack) for b in response.brokers]
        me = broker.endpoints[0].port
        rack = version >= 1
        assert brokers == [
            (1, me, None),
            (2, peer_port(2), "r2" if rack else None),
            (3, peer_port(3), "r3" if rack else None),
        ], version
        if version >= 1:
            assert response.controller_id == 1  # the active controller is a broker here
        [topic] = [t for t in response.topics if t.name == "placed"]
        assert [(p.leader_id, p.replica_nodes) for p in topic.partitions] == [
            (2, [2, 3]), (2, [2, 1]), (1, [1, 2]), (3, [3, 2]),
        ]  # fmt: skip


async def test_fenced_broker_partitions_are_offline(
    cluster: BrokerState, client: KafkaClient
) -> None:
    epoch = await register(cluster, 4)
    await create_placed(cluster, "on-four", [[4]])
    await create_placed(cluster, "four-one", [[4, 1]])
    await fence(cluster, 4, epoch)
    response = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
    assert [b.node_id for b in response.brokers] == [1, 2, 3]
    leaders = {
        t.name: [(p.error_code, p.leader_id) for p in t.partitions] for t in response.topics
    }
    assert leaders["on-four"] == [(ErrorCode.LEADER_NOT_AVAILABLE, -1)]
    # fencing moved the leadership to the in-sync replica here
    assert leaders["four-one"] == [(ErrorCode.NONE, 1)]
    # the image itself says so: never led by a fenced broker
    image_partition = cluster.image.partition("on-four", 0)
    assert image_partition is not None
    assert image_partition.leader == -1


@pytest.fixture
def other_listener_overrides() -> dict[str, str]:
    return {
        **CLUSTER_OVERRIDES,
        "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    }


async def test_brokers_without_the_listener_are_left_out(
    tmp_path: Path, other_listener_overrides: dict[str, str]
) -> None:
    async with open_broker(tmp_path / "d", other_listener_overrides) as running:
        state = state_of(running)
        await register(state, 2, listeners=("PLAINTEXT",))
        await register(state, 3, listeners=("PLAINTEXT", "OTHER"))
        for endpoint, expected in zip(running.endpoints, ([1, 2, 3], [1, 3]), strict=True):
            client = await KafkaClient.connect(f"{endpoint.host}:{endpoint.port}")
            try:
                meta = await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)
                described = await client.request(
                    DescribeClusterRequest(), 1, DescribeClusterResponse
                )
            finally:
                await client.aclose()
            assert [b.node_id for b in meta.brokers] == expected, endpoint.name
            assert [b.broker_id for b in described.brokers] == expected, endpoint.name


async def test_controller_id_is_an_unfenced_broker_when_the_controller_is_not_one(
    broker: EmbeddedBroker, cluster: BrokerState, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KRaft broker names a random unfenced broker (KafkaApis: getRandomAliveBrokerId): a
    controller-only node is never reachable by clients on a broker listener."""
    monkeypatch.setattr(type(cluster.controller), "active_controller_id", property(lambda _: 9))
    seen = set()
    for _ in range(30):
        meta = await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)
        described = await client.request(DescribeClusterRequest(), 1, DescribeClusterResponse)
        seen |= {meta.controller_id, described.controller_id}
    assert seen <= {1, 2, 3}
    assert len(seen) > 1  # random, as Kafka's


async def test_stock_client_sees_every_broker_and_leader(
    broker: EmbeddedBroker, cluster: BrokerState
) -> None:
    """librdkafka's metadata lists the three brokers and each partition's leader (brokers 2
    and 3 run nowhere, so only the bootstrap broker is asked)."""
    confluent_kafka = pytest.importorskip("confluent_kafka.admin")

    def run() -> tuple[dict[int, str], dict[int, int]]:
        admin = confluent_kafka.AdminClient(
            {"bootstrap.servers": broker.bootstrap, "log_level": 0}
        )
        metadata = admin.list_topics(topic="placed", timeout=10)
        brokers = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
        leaders = {p.id: p.leader for p in metadata.topics["placed"].partitions.values()}
        return brokers, leaders

    brokers, leaders = await trio.to_thread.run_sync(run)
    assert brokers == {
        1: broker.bootstrap,
        2: f"127.0.0.1:{peer_port(2)}",
        3: f"127.0.0.1:{peer_port(3)}",
    }
    assert leaders == {0: 2, 1: 2, 2: 1, 3: 3}


@pytest.mark.parametrize("version", [9, 10, 12])
async def test_produce_names_the_current_leader(
    cluster: BrokerState, client: KafkaClient, version: int
) -> None:
    """KIP-951 (Produce v10+): NOT_LEADER_OR_FOLLOWER carries the leader and its endpoint."""
    request = produce_request("placed", batch(), partition=0, acks=1)  # no follower runs
    request.topic_data[0].partition_data += [
        produce_request("placed", batch(), partition=p).topic_data[0].partition_data[0]
        for p in (2, 3)
    ]
    response = await client.request(request, version, ProduceResponse)
    parts = response.responses[0].partition_responses
    assert [p.error_code for p in parts] == [NLOF, 0, NLOF]
    if version < 10:
        assert response.node_endpoints == []
        return
    leaders = [(p.current_leader.leader_id, p.current_leader.leader_epoch) for p in parts]
    assert leaders == [(2, 0), (-1, -1), (3, 0)]
    assert [(n.node_id, n.port, n.rack) for n in response.node_endpoints] == [
        (2, peer_port(2), "r2"),
        (3, peer_port(3), "r3"),
    ]


@pytest.mark.parametrize("version", [15, 16, 17])
async def test_fetch_names_the_current_leader(
    cluster: BrokerState, client: KafkaClient, version: int
) -> None:
    """KIP-951 (Fetch v16+): NOT_LEADER_OR_FOLLOWER carries the leader and its endpoint."""
    topic = cluster.image.topic("placed")
    assert topic is not None
    request = fetch_request("placed", 0)
    request.topics[0].topic_id = topic.topic_id
    request.topics[0].partitions = [
        fetch_request("placed", 0, partition=p).topics[0].partitions[0] for p in (0, 2)
    ]  # partition 0 has no replica here (a follower would serve: KIP-392)
    response = await client.request(request, version, FetchResponse)
    parts = response.responses[0].partitions
    assert [p.error_code for p in parts] == [NLOF, 0]
    if version < 16:
        assert response.node_endpoints == []
        return
    assert (parts[0].current_leader.leader_id, parts[0].current_leader.leader_epoch) == (2, 0)
    assert parts[1].current_leader.leader_id == -1  # served: no redirect
    assert [(n.node_id, n.port) for n in response.node_endpoints] == [(2, peer_port(2))]


async def test_kafka_python_reads_the_redirect(broker: EmbeddedBroker, cluster: BrokerState) -> None:
    """kafka-python's own codec and client framing, over a socket: a Produce v10 to a
    partition broker 2 leads decodes as NOT_LEADER_OR_FOLLOWER naming broker 2 and its
    endpoint (what its producer uses to move the batch without a Metadata round trip)."""
    from tests.wire.kp_helpers import kp_producer, kp_send, record_batch

    request = kp_producer.ProduceRequest(
        version=10,
        transactional_id=None,
        acks=1,  # partition 2's follower runs nowhere: acks=all would time out
        timeout_ms=5000,
        topic_data=[
            kp_producer.ProduceRequest.TopicProduceData(
                name="placed",
                partition_data=[
                    kp_producer.ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=i, records=record_batch(b"v", producer_id=-1)
                    )
                    for i in (1, 2)
                ],
            )
        ],
    )
    proto, data = kp_send([(request, 1)])
    endpoint = broker.endpoints[0]
    stream = await trio.open_tcp_stream(endpoint.host, endpoint.port)
    try:
        await stream.send_all(data)
        responses: list[tuple[int, object]] = []
        with trio.fail_after(10):
            while not responses:
                responses += proto.receive_bytes(await stream.receive_some(65536))
    finally:
        await stream.aclose()
    assert not proto.in_flight_requests
    [(_, response)] = responses
    parts = response.responses[0].partition_responses  # type: ignore[attr-defined]
    assert [p.error_code for p in parts] == [NLOF, 0]
    assert (parts[0].current_leader.leader_id, parts[0].current_leader.leader_epoch) == (2, 0)
    endpoints = response.node_endpoints  # type: ignore[attr-defined]
    assert [(n.node_id, n.host, n.port, n.rack) for n in endpoints] == [
        (2, "127.0.0.1", peer_port(2), "r2")
    ]


async def test_list_offsets_from_the_debugging_replica_reads_a_follower(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """Kafka serves ListOffsets with replica id -2 from any local replica (fetchOnlyFromLeader
    is false only for it): the follower replica of partition 1 answers; partition 0 has none."""
    request = ListOffsetsRequest(
        replica_id=-2,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                "placed",
                [
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-2)
                    for p in range(3)
                ],
            )
        ],
    )
    response = await client.request(request, 7, ListOffsetsResponse)
    assert [(p.error_code, p.offset) for p in response.topics[0].partitions] == [
        (NLOF, -1), (0, 0), (0, 0),
    ]  # fmt: skip


async def test_following_a_change_touches_only_its_topics(
    cluster: BrokerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the delta that made the image, only the topics it changed are followed: a
    partition moving in "placed" does not scan "other" (a million partitions elsewhere cost
    nothing), and leaves the same roles as following every partition; a delta not made
    against the image followed last, a broker's registration or fencing concerns every one."""
    await create_placed(cluster, "other", [[1], [1]])
    follower = ImageFollower(cluster, cluster.replication)
    before = cluster.image
    scanned: list[str] = []
    original = cluster.replication.follow

    def spy(image: MetadataImage, topics: Set[str] | None = None) -> None:
        scanned.append("all" if topics is None else ",".join(sorted(topics)))
        original(image, topics)

    monkeypatch.setattr(cluster.replication, "follow", spy)
    await follower(before)
    assert set(scanned) == {"all"}  # the first image
    topic = before.topic("placed")
    assert topic is not None
    delta = before.delta()
    delta.replay(
        PartitionChangeRecord(
            partition_id=0, topic_id=topic.topic_id, replicas=[2, 1], isr=[2, 1], leader=2
        )
    )
    moved = delta.apply()
    assert touched_topics(moved, delta) == {"placed"}
    scanned.clear()
    await follower(moved, delta)
    assert set(scanned) == {"placed"}
    assert cluster.logs.get("placed", 0) is not None  # the new follower replica's log
    assert cluster.logs.get("other", 0) is not None  # untouched, kept
    partial = (dict(cluster.replication.targets), set(cluster.replication.leaders))
    assert ("placed", 0) in partial[0]
    scanned.clear()
    await follower(moved, delta)  # again: `delta` was not made against `moved`
    assert set(scanned) == {"all"}
    assert (dict(cluster.replication.targets), set(cluster.replication.leaders)) == partial
    fenced = moved.delta()
    fenced.replay(FenceBrokerRecord(id=3, epoch=_epoch_of(moved, 3)))
    assert touched_topics(fenced.apply(), fenced) is None
    assert touched_topics(moved, None) is None


def _epoch_of(image: MetadataImage, broker_id: int) -> int:
    registration = image.broker(broker_id)
    assert registration is not None
    return registration.epoch
