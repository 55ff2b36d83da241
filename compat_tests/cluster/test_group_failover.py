"""Consumer groups and idempotent producers across kill -9 of a leader, in a 3-node combined
cluster of `strom serve` children with stock clients (confluent-kafka).

- A group consumes and commits; the broker leading the group's `__consumer_offsets` partition
  (its coordinator) is killed right after a commit is acknowledged. The group goes on with the
  new coordinator from its committed offsets: the commit survived (it was answered only once
  every ISR member held it), nothing is delivered twice past it and nothing is skipped.
- An idempotent producer keeps producing while the partition leader is killed: what it
  acknowledged is in the log exactly once and in order, with no gaps (its retries reaching the
  new leader are recognised as duplicates from the producer state the follower rebuilt from the
  replicated batches).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.cluster.test_replication import (
    FAST,
    consume_all,
    create,
    produce,
    settled,
    values,
)
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Deadline, wait_until
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster

OFFSETS = "__consumer_offsets"
GROUP_FAST = {
    **FAST,
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",  # every group's coordinator leads partition 0
    "group.initial.rebalance.delay.ms": "0",
}


def group_consumer(bootstrap: str, group: str, **config: Any) -> Consumer:
    return ck.consumer(
        bootstrap,
        **{
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            **config,
        },
    )


def take(consumer: Consumer, count: int, timeout: float = 60) -> list[tuple[int, bytes]]:
    """Exactly `count` records (offset, value) from the subscription. Errors a failover makes
    the client report on its own (a broker gone, a transport failure) are retried through;
    any other fails the test."""
    out: list[tuple[int, bytes]] = []
    deadline = Deadline(timeout)
    while len(out) < count:
        if deadline.expired:
            raise AssertionError(f"consumed {len(out)} of {count} records within {timeout}s")
        for msg in consumer.consume(num_messages=count - len(out), timeout=0.2):
            err = msg.error()
            if err is not None:
                if err.retriable() or err.code() in (
                    KafkaError._TRANSPORT,
                    KafkaError._ALL_BROKERS_DOWN,
                ):
                    continue
                raise AssertionError(f"consumer error: {err}")
            out.append((_offset(msg), msg.value() or b""))
    return out


def _offset(msg: Message) -> int:
    offset = msg.offset()
    assert offset is not None
    return int(offset)


def commit(consumer: Consumer, topic: str, offset: int, timeout: float = 60) -> None:
    """A synchronous commit of `offset`, retried while the coordinator moves."""
    deadline = Deadline(timeout)
    while True:
        try:
            [done] = consumer.commit(
                offsets=[TopicPartition(topic, 0, offset)], asynchronous=False
            )
        except Exception as exc:  # KafkaException: NOT_COORDINATOR, ... while it moves
            if deadline.expired:
                raise AssertionError(f"commit of {offset} failed: {exc}") from exc
            continue
        assert done.error is None, done.error
        return


def committed(consumer: Consumer, topic: str) -> int:
    [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
    return int(tp.offset)


def coordinator(cluster: ClusterProcess) -> ClusterNode:
    """The node leading `__consumer_offsets` partition 0, with all three replicas in its ISR."""
    leader, isr = settled(cluster, OFFSETS, 3)
    assert isr == [1, 2, 3]
    return cluster.node(leader)


def test_a_group_continues_from_its_commits_after_kill9_of_its_coordinator(
    strom_cluster: StartCluster,
) -> None:
    cluster = strom_cluster(combined=3, overrides=GROUP_FAST)
    wait_for_leader(cluster)
    topic = "orders"
    create(cluster, topic, replicas=3, min_insync=2)
    settled(cluster, topic, 3)
    produce(cluster.bootstrap, topic, list(values(300)))

    consumer = group_consumer(cluster.bootstrap, "failover")
    try:
        consumer.subscribe([topic])
        first = take(consumer, 150)
        assert [o for o, _ in first] == list(range(150))
        old = coordinator(cluster)  # the topic exists now: the group's first lookup made it
        commit(consumer, topic, 150)
        # answered only once every ISR member holds it: kill the coordinator at once
        old.kill9()
        survivors = [n for n in cluster.nodes if n is not old]
        new_leader, new_isr = settled(cluster, OFFSETS, 2)
        assert new_leader != old.node_id
        assert old.node_id not in new_isr

        # the same member goes on: its position, then its commits, on the new coordinator
        rest = take(consumer, 150)
        delivered = first + rest
        assert [o for o, _ in rest] == list(range(150, 300))
        assert [v for _, v in delivered] == list(values(300))
        assert committed(consumer, topic) == 150  # the commit survived the failover
        commit(consumer, topic, 300)
    finally:
        consumer.close()

    # a new member of the group starts at the last commit: nothing again, nothing skipped
    bootstrap = ",".join(n.bootstrap for n in survivors)
    produce(bootstrap, topic, list(values(50, 300)))
    second = group_consumer(bootstrap, "failover")
    try:
        second.subscribe([topic])
        got = take(second, 50)
        assert got == [(300 + i, v) for i, v in enumerate(values(50, 300))]
        assert second.consume(num_messages=10, timeout=0.5) == []
    finally:
        second.close()

    old.restart(clean=False)  # it comes back as a follower of __consumer_offsets
    settled(cluster, OFFSETS, 3)


def test_an_idempotent_producer_keeps_producing_across_kill9_of_the_leader(
    strom_cluster: StartCluster,
) -> None:
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "payments"
    create(cluster, topic, replicas=3, min_insync=2)
    leader, _ = settled(cluster, topic, 3)
    old = cluster.node(leader)
    total = 6000
    acked: list[int] = []
    failed: list[str] = []
    fatal: list[str] = []  # e.g. a sequence gap librdkafka cannot repair

    producer = ck.producer(
        cluster.bootstrap,
        **{
            "enable.idempotence": True,
            "acks": "all",
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 2,
            "batch.num.messages": 50,
            "message.timeout.ms": 120000,
            "error_cb": lambda err: fatal.append(str(err)) if err.fatal() else None,
        },
    )

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.append(_offset(msg))

    for i, value in enumerate(values(total)):
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if i == total // 3:
            # batches are in flight: kill the leader under them
            wait_until(lambda: producer.poll(0.01) >= 0 and len(acked) > 0, timeout=30,
                       what="first acknowledgements", interval=0)  # fmt: skip
            old.kill9()
    assert producer.flush(120) == 0
    assert not failed, failed[:5]
    assert not fatal, fatal
    assert len(acked) == total
    assert sorted(acked) == list(range(total))  # every record once, no gap in the offsets

    survivors = [n for n in cluster.nodes if n is not old]
    new_leader, _ = settled(cluster, topic, 2)
    assert new_leader != old.node_id
    bootstrap = ",".join(n.bootstrap for n in survivors)
    assert consume_all(bootstrap, topic, total) == list(values(total))  # in order, no duplicate
