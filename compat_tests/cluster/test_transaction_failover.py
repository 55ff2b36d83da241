"""An open transaction across kill -9 of the partition leader, in a 3-node combined cluster of
`strom serve` children, with raw requests (what the log side alone must guarantee, whatever
coordinator drives the transaction).

A transactional batch is produced with acks=all between plain records (verification off and
Produce v11, so no coordinator is asked). The leader's last stable offset stops at the
batch: a read_committed consumer gets only the plain record before it. The leader is killed;
the follower elected holds the same open transaction (the LSO, ListOffsets for
read_committed, DescribeProducers' open transaction start), built from the replicated batches.
The old leader, started again, catches up as a follower with the same state; the leader
after the next kill -9 has it too.

Then the same with a stock transactional producer (confluent-kafka): a transaction goes on
through the new leader after its partition leader is killed -9, commits, and a read_committed
consumer reads each committed record once; an aborted transaction never shows.
"""

from __future__ import annotations

import time

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.cluster.test_replication import FAST, _call, create, settled
from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.test_read_committed import read, send
from compat_tests.helpers import wait_until
from strom.broker.testing.cluster import ClusterNode
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records import Record, build_batch, iter_batches

TOPIC = "ledger"
PID = 70_000
OVERRIDES = {**FAST, "transaction.partition.verification.enable": "false"}


def raw_produce(node: ClusterNode, batch: bytes, transactional_id: str | None = None) -> int:
    request = ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(TOPIC, [ProduceRequest.PartitionProduceData(0, batch)])
        ],
    )
    response = _call(node.bootstrap, request, 11, ProduceResponse)
    assert isinstance(response, ProduceResponse)
    return int(response.responses[0].partition_responses[0].error_code)


def plain(value: bytes) -> bytes:
    return bytes(build_batch([Record(b"k", value, (), int(time.time() * 1000))]))


def transactional(value: bytes, seq: int) -> bytes:
    records = [Record(b"k", value, (), int(time.time() * 1000))]
    return bytes(
        build_batch(
            records, producer_id=PID, producer_epoch=0, base_sequence=seq, transactional=True
        )
    )


def committed_latest(node: ClusterNode) -> int | None:
    """ListOffsets latest for a read_committed consumer: the LSO (None: no answer yet)."""
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                TOPIC, [ListOffsetsRequest.ListOffsetsPartition(0, -1, -1)]
            )
        ],
    )
    response = _call(node.bootstrap, request, 7, ListOffsetsResponse)
    if not isinstance(response, ListOffsetsResponse):
        return None
    [p] = response.topics[0].partitions
    return int(p.offset) if p.error_code == ErrorCode.NONE else None


def committed_fetch(node: ClusterNode) -> tuple[int, list[int]] | None:
    """(last stable offset, offsets of the records read) of a read_committed Fetch from 0."""
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=[
            FetchRequest.FetchTopic(
                topic=TOPIC,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    response = _call(node.bootstrap, request, 12, FetchResponse)
    if not isinstance(response, FetchResponse):
        return None
    [p] = response.responses[0].partitions
    if p.error_code != ErrorCode.NONE:
        return None
    offsets = [h.base_offset for h, _ in iter_batches(bytes(p.records or b""), allow_partial=False)]
    return int(p.last_stable_offset), offsets


def open_transaction_start(node: ClusterNode) -> int | None:
    request = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(TOPIC, [0])])
    response = _call(node.bootstrap, request, 0, DescribeProducersResponse)
    if not isinstance(response, DescribeProducersResponse):
        return None
    [p] = response.topics[0].partitions
    starts = [s.current_txn_start_offset for s in p.active_producers if s.producer_id == PID]
    return starts[0] if starts else None


def test_an_open_transaction_survives_kill9_of_the_leader(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, overrides=OVERRIDES)
    wait_for_leader(cluster)
    create(cluster, TOPIC, replicas=3, min_insync=2)
    leader_id, _ = settled(cluster, TOPIC, 3)
    leader = cluster.node(leader_id)
    assert raw_produce(leader, plain(b"before")) == ErrorCode.NONE
    assert raw_produce(leader, transactional(b"t0", 0), "raw-app") == ErrorCode.NONE
    assert raw_produce(leader, transactional(b"t1", 1), "raw-app") == ErrorCode.NONE
    assert raw_produce(leader, plain(b"after")) == ErrorCode.NONE  # acks=all: on every ISR member
    assert committed_latest(leader) == 1
    assert committed_fetch(leader) == (1, [0])
    assert open_transaction_start(leader) == 1

    leader.kill9()
    new_id, _ = settled(cluster, TOPIC, 2)
    assert new_id != leader_id
    new = cluster.node(new_id)
    # the new leader has the open transaction from the replicated batches alone
    assert wait_until(lambda: committed_latest(new), timeout=30, what="the new leader's LSO") == 1
    assert committed_fetch(new) == (1, [0])
    assert open_transaction_start(new) == 1
    # the transaction goes on at the new leader (its producer state continues the sequence)
    assert raw_produce(new, transactional(b"t2", 2), "raw-app") == ErrorCode.NONE
    assert committed_latest(new) == 1

    leader.restart(clean=False)
    settled(cluster, TOPIC, 3)
    # the old leader comes back as a follower with the same state (a consumer may read a
    # follower, KIP-392: it answers up to its own LSO)
    assert wait_until(
        lambda: committed_fetch(leader) == (1, [0]) or None, timeout=30, what="the follower's LSO"
    )
    new.kill9()
    third_id, _ = settled(cluster, TOPIC, 2)
    third = cluster.node(third_id)
    assert wait_until(lambda: committed_latest(third), timeout=30, what="the LSO") == 1
    assert open_transaction_start(third) == 1


def test_a_transaction_goes_on_across_kill9_of_its_partition_leader(
    strom_cluster: StartCluster,
) -> None:
    """With a stock transactional producer (confluent-kafka): records of an open transaction
    on a replication-factor-3 partition, the partition leader killed -9, more records of the
    same transaction through the new leader, commit; then a transaction aborted. A
    read_committed consumer reads exactly the committed records once each."""
    cluster = strom_cluster(
        combined=3,
        overrides={
            **FAST,
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
        },
    )
    wait_for_leader(cluster)
    topic = "orders-txn"
    create(cluster, topic, replicas=3, min_insync=2)
    leader_id, _ = settled(cluster, topic, 3)
    producer = ck.producer(
        cluster.bootstrap,
        **{"transactional.id": "failover-app", "transaction.timeout.ms": 120_000},
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    send(producer, topic, *[f"a{i}" for i in range(10)])
    cluster.node(leader_id).kill9()
    new_id, _ = settled(cluster, topic, 2)
    assert new_id != leader_id
    send(producer, topic, *[f"a{i}" for i in range(10, 20)])
    producer.commit_transaction(60)
    producer.begin_transaction()
    send(producer, topic, *[f"b{i}" for i in range(5)])
    producer.abort_transaction(60)
    survivors = ",".join(n.bootstrap for n in cluster.nodes if n.node_id != leader_id)
    assert read(survivors, topic, "read_committed") == [f"a{i}" for i in range(20)]
    cluster.node(leader_id).restart(clean=False)
    settled(cluster, topic, 3)
    assert read(cluster.bootstrap, topic, "read_committed") == [f"a{i}" for i in range(20)]
