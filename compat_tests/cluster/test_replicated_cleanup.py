"""DeleteRecords, retention and compaction on replicated partitions: 3-node combined clusters of
`strom serve` children, confluent-kafka for the admin API, producing and consuming, and the
repo's raw client for one replica's log start (ListOffsets earliest as the debugging replica
-2, which any replica answers for its own log).

- DeleteRecords on a replication factor 3 topic is answered only once every live replica's log
  start reached the offset (Kafka's low watermark), so right after the answer all three replicas
  start there; after a kill -9 of the leader the new leader serves from there.
- Retention (retention.ms, small segments) deletes the old segments on the followers too; a
  consumer of the follower elected leader starts at that replica's log start and reads every
  record that retention kept.
- A compacted topic is cleaned on every replica (each runs its own cleaner, as in Kafka); after
  a kill -9 of the leader a consumer of the new leader sees the latest value of every key.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from compat_tests.cluster.test_cluster import wait_for_leader, wait_for_topics
from compat_tests.cluster.test_replication import (
    DEBUGGING_REPLICA,
    FAST,
    _call,
    ends_equal,
    settled,
)
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Deadline, wait_until
from compat_tests.retention.test_confluent import produce
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.errors import ErrorCode
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

EARLIEST = -2
CLEANING = {
    **FAST,
    "log.retention.check.interval.ms": "100",
    "log.cleaner.backoff.ms": "100",
}
"""Retention checks and the cleaner every 100 ms, so the tests see them act within seconds."""


def log_start(node: ClusterNode, topic: str) -> int | None:
    """The log start offset of this node's replica of partition 0 (ListOffsets earliest as
    replica -2); None without an answer."""
    request = ListOffsetsRequest(
        replica_id=DEBUGGING_REPLICA,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                topic, [ListOffsetsRequest.ListOffsetsPartition(0, -1, EARLIEST)]
            )
        ],
    )
    response = _call(node.bootstrap, request, 7, ListOffsetsResponse)
    if not isinstance(response, ListOffsetsResponse):
        return None
    [p] = response.topics[0].partitions
    return int(p.offset) if p.error_code == ErrorCode.NONE else None


def segment_bases(node: ClusterNode, topic: str) -> list[int]:
    """The base offsets of the segment files of this node's replica of partition 0."""
    directory = Path(node.data_dir) / "data" / f"{topic}-0"
    return sorted(int(p.stem) for p in directory.glob("*.log"))


def create(cluster: ClusterProcess, topic: str, config: dict[str, str]) -> int:
    """A topic with one partition on all three nodes; its leader once the ISR holds all three."""
    admin = ck.admin(cluster.bootstrap)
    new = ck.NewTopic(topic, num_partitions=1, replication_factor=3,
                      config={"min.insync.replicas": "2", **config})  # fmt: skip
    for future in admin.create_topics([new], operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    for node in cluster.nodes:
        wait_for_topics(node, topic)
    leader, isr = settled(cluster, topic, 3)
    assert isr == [1, 2, 3]
    return leader


def read_from_start(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes | None, bytes]]:
    """(offset, key, value) of partition 0 from the earliest offset up to `end`."""
    consumer = ck.consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes]] = []
        deadline = Deadline(60)
        while not out or out[-1][0] < end - 1:
            assert not deadline.expired, f"read up to {out[-1][0] if out else None} of {end}"
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                offset = msg.offset()
                assert offset is not None
                out.append((offset, msg.key(), msg.value() or b""))
        return out
    finally:
        consumer.close()


def fail_over(cluster: ClusterProcess, topic: str, leader: int) -> ClusterNode:
    """kill -9 of `leader`; the node elected in its place."""
    cluster.node(leader).kill9()
    new_leader, isr = settled(cluster, topic, 2)
    assert new_leader != leader
    assert leader not in isr
    return cluster.node(new_leader)


def test_delete_records_reaches_every_replica_before_the_answer(
    strom_cluster: StartCluster,
) -> None:
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "deleted"
    leader = create(cluster, topic, {})
    produce(
        ck.producer(cluster.bootstrap),
        topic,
        [(None, b"v%d" % i, None) for i in range(100)],
        flush_timeout=60,
    )
    wait_until(lambda: ends_equal(cluster.nodes, topic, 100), timeout=20,
               what="every replica's log ends at 100", interval=0.1)  # fmt: skip

    admin = ck.admin(cluster.bootstrap)
    futures = admin.delete_records(
        [TopicPartition(topic, 0, 60)], operation_timeout=30, request_timeout=40
    )
    [deleted] = [f.result(timeout=45) for f in futures.values()]
    assert deleted.low_watermark == 60
    # the answer waited for the low watermark: no replica may still start below 60
    assert [log_start(n, topic) for n in cluster.nodes] == [60, 60, 60]

    new_leader = fail_over(cluster, topic, leader)
    consumer = ck.consumer(new_leader.bootstrap)
    try:
        assert ck.watermarks(consumer, topic, 0) == (60, 100)
    finally:
        consumer.close()
    got = read_from_start(new_leader.bootstrap, topic, 100)
    assert [(o, v) for o, _, v in got] == [(i, b"v%d" % i) for i in range(60, 100)]


def test_retention_deletes_old_segments_on_the_followers(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, overrides=CLEANING)
    wait_for_leader(cluster)
    topic = "retained"
    leader = create(cluster, topic, {"retention.ms": "60000", "segment.bytes": "1024"})
    producer = ck.producer(cluster.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    old = int(time.time() * 1000) - 600_000  # ten minutes old: past retention.ms
    produce(
        producer,
        topic,
        [(None, b"old-%02d" % i + b"." * 100, old + i) for i in range(40)],
        flush_timeout=60,
    )
    produce(
        producer,
        topic,
        [(None, b"new-%02d" % i + b"." * 100, None) for i in range(40)],
        flush_timeout=60,
    )
    wait_until(lambda: ends_equal(cluster.nodes, topic, 80), timeout=20,
               what="every replica's log ends at 80", interval=0.1)  # fmt: skip

    def trimmed() -> dict[int, tuple[int, list[int]]] | None:
        """Each node's log start and segment files, once every replica deleted its wholly old
        segments and the followers' log starts reached the leader's (they follow it with their
        fetches). A replica deletes up to its high watermark, so a follower may go on deleting
        after a first look: its log start is read before and after its files, and must not
        have moved between."""
        found = {}
        for node in cluster.nodes:
            start = log_start(node, topic)
            bases = segment_bases(node, topic)
            if start is None or start <= 0 or log_start(node, topic) != start:
                return None
            # the segment files below the log start are gone from its disk (the first one
            # among them too): the first one left holds the log start (a deletion under
            # way: look again)
            if not bases or 0 in bases or bases[0] > start:
                return None
            if len(bases) > 1 and bases[1] <= start:
                return None
            found[node.node_id] = (start, bases)
        if min(start for start, _ in found.values()) < found[leader][0]:
            return None
        return found

    found = wait_until(trimmed, timeout=30, what="retention on every replica", interval=0.1)
    for start, _bases in found.values():
        assert 0 < start <= 40, found  # only old records went

    new_leader = fail_over(cluster, topic, leader)
    new_start = log_start(new_leader, topic)
    assert new_start is not None
    assert 0 < new_start <= 40
    got = read_from_start(new_leader.bootstrap, topic, 80)
    assert [o for o, _, _ in got] == list(range(new_start, 80))  # from its log start, no gaps
    assert [v[:6] for o, _, v in got if o >= 40] == [b"new-%02d" % i for i in range(40)]


def test_compaction_survives_a_leader_change(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, overrides=CLEANING)
    wait_for_leader(cluster)
    topic = "compacted"
    leader = create(
        cluster,
        topic,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "1024",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    producer = ck.producer(cluster.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    keys, rounds = 8, 10
    items = [
        (b"k%d" % k, b"k%d-v%d" % (k, r) + b"." * 60, None)
        for r in range(rounds)
        for k in range(keys)
    ]
    produce(producer, topic, items, flush_timeout=60)
    total = keys * rounds
    wait_until(lambda: ends_equal(cluster.nodes, topic, total), timeout=20,
               what=f"every replica's log ends at {total}", interval=0.1)  # fmt: skip

    def cleaned(node: ClusterNode) -> bool:
        """Whether the node's cleaner checkpoint names the partition (it was compacted)."""
        path = Path(node.data_dir) / "data" / "cleaner-offset-checkpoint"
        if not path.exists():
            return False
        lines = path.read_text().splitlines()[2:]
        return any(line.split()[:2] == [topic, "0"] and int(line.split()[2]) > 0 for line in lines)

    wait_until(lambda: all(cleaned(n) for n in cluster.nodes), timeout=30,
               what="every replica compacted", interval=0.1)  # fmt: skip

    new_leader = fail_over(cluster, topic, leader)
    got = read_from_start(new_leader.bootstrap, topic, total)
    assert len(got) < total  # the new leader's own log was compacted
    latest: dict[bytes, bytes] = {}
    for _, key, value in got:
        assert key is not None
        latest[key] = value.rstrip(b".")
    assert latest == {b"k%d" % k: b"k%d-v%d" % (k, rounds - 1) for k in range(keys)}
