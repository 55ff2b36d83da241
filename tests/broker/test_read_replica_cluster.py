"""KIP-392 and the follower's log start, on a real 3-node cluster with a stock client.

Each node is on its own rack; the topic has one partition on all three. A confluent-kafka
consumer with `client.rack` set to a follower's rack is told by the leader (preferred read
replica) to fetch from that follower, which serves it up to its high watermark: the follower
says so in its log (once per partition) and the consumer reads everything. DeleteRecords on the
leader reaches the followers through the log start offset in every replica fetch answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster
from strom.config.broker import LEADER_SELECTOR, RACK_AWARE_SELECTOR
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}
TOPIC = "near"
COUNT = 50
DEADLINE_S = 30.0


def _cluster(strom_cluster: StartCluster, selector: str = RACK_AWARE_SELECTOR) -> ClusterProcess:
    return strom_cluster(
        combined=3,
        overrides={"replica.selector.class": selector},
        node_overrides={node: {"broker.rack": rack} for node, rack in RACKS.items()},
    )


def _create_and_fill(cluster: ClusterProcess) -> int:
    """Create the RF=3 topic, produce COUNT records with acks=all; the partition's leader."""
    admin = ck_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([ck_admin.NewTopic(TOPIC, 1, 3)], operation_timeout=20)
    futures[TOPIC].result(timeout=30)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(COUNT):
        producer.produce(TOPIC, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    metadata = admin.list_topics(TOPIC, timeout=10)
    partition = metadata.topics[TOPIC].partitions[0]
    assert sorted(partition.isrs) == [1, 2, 3]
    return int(partition.leader)


def _wait_for(what: str, check: Callable[[], bool], cluster: ClusterProcess) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} within {DEADLINE_S}s; the nodes:\n{cluster.report(40)}")
        time.sleep(0.05)  # polling what we wait for, against the deadline above


@pytest.mark.parametrize("selector", [RACK_AWARE_SELECTOR, LEADER_SELECTOR])
def test_a_consumer_reads_from_the_follower_on_its_rack(
    strom_cluster: StartCluster, selector: str
) -> None:
    """With the rack-aware selector the follower on the consumer's rack serves it; with
    Kafka's leader selector the leader does."""
    cluster = _cluster(strom_cluster, selector)
    leader = _create_and_fill(cluster)
    follower = next(n for n in RACKS if n != leader)
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "kip392",
            "enable.auto.commit": False,
            "client.rack": RACKS[follower],
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(COUNT)]
    line = f"{TOPIC}-0: serving consumer fetches as a follower"
    served = [n for n in RACKS if line in cluster.node(n).tail(400)]
    assert served == ([follower] if selector == RACK_AWARE_SELECTOR else [])


def _earliest(node: ClusterNode) -> int:
    """ListOffsets earliest from the debugging replica id -2: any local replica answers."""

    async def ask() -> int:
        with trio.fail_after(5):
            client = await KafkaClient.connect(node.bootstrap)
            try:
                request = ListOffsetsRequest(
                    replica_id=-2,
                    topics=[
                        ListOffsetsRequest.ListOffsetsTopic(
                            TOPIC, [ListOffsetsRequest.ListOffsetsPartition(0, -1, -2)]
                        )
                    ],
                )
                response = await client.request(request, 7, ListOffsetsResponse)
            finally:
                await client.aclose()
        [p] = response.topics[0].partitions
        assert p.error_code == 0
        return int(p.offset)

    return trio.run(ask)


def test_delete_records_reaches_the_followers(strom_cluster: StartCluster) -> None:
    cluster = _cluster(strom_cluster)
    _create_and_fill(cluster)
    admin = ck_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.delete_records([ck.TopicPartition(TOPIC, 0, 30)], operation_timeout=10)
    [future] = futures.values()
    assert future.result(timeout=30).low_watermark == 30
    _wait_for(
        "every replica's log start at 30",
        lambda: [_earliest(cluster.node(n)) for n in RACKS] == [30, 30, 30],
        cluster,
    )
