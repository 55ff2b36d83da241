"""MirrorMaker 2 between two Strom brokers, and from Apache Kafka 4.1 to Strom.

Stock MirrorMaker 2 (dedicated mode, Kafka 4.1's connect-mirror) replicates a topic from
cluster A to cluster B. The tests check what an operator relies on: the topic appears on B
under the replication policy's name with its partitions, every record arrives in order with
its exact key, value, headers and timestamp, topic configs follow (also a change made while
it runs), consumer-group offsets committed on A show up translated on B
(`sync.group.offsets.enabled`), and the heartbeats topic is written. The second test migrates
from a real Apache Kafka broker to Strom with the identity policy, as a cut-over would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined,unused-ignore]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from compat_tests.apache_kafka import ApacheKafka
from compat_tests.helpers import Deadline, now_ms, wait_until
from compat_tests.mirrormaker.mm2 import MirrorMaker2
from strom.broker.testing.embedded import BrokerProcess

TOPIC = "mm-orders"
GROUP = "mm-group"
PARTITIONS = 2
PER_PARTITION = 25
COMMITTED = {0: PER_PARTITION, 1: PER_PARTITION}
"""What the group commits on the source: everything read. (MirrorMaker translates an offset in
the middle of a partition only to its nearest retained offset sync, which is not exact by
design; a fully read partition translates exactly.)"""
T0 = (now_ms() // 1000) * 1000 - 600_000
"""Ten minutes ago: within the topic's retention.ms, which Kafka's retention enforces."""
REPLICATION = 90.0
"""Seconds MirrorMaker gets for each thing it must do (JVM start and first sync included)."""

Record = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int]


@pytest.fixture
def cluster_a(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "a") as broker:
        yield broker


@pytest.fixture
def cluster_b(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "b") as broker:
        yield broker


def expected_records() -> list[Record]:
    out: list[Record] = []
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            key = None if i % 7 == 3 else f"k-{p}-{i}".encode()
            value = None if i % 11 == 5 else f"value {p}/{i} ✓".encode() * (1 + i % 3)
            headers = (("h", f"{i}".encode()), ("h", b"")) if i % 2 else ()
            out.append((p, i, key, value, headers, T0 + 1000 * p + i))
    return out


def create_and_fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, PARTITIONS, 1, config={"retention.ms": "3600000",
                                                   "max.message.bytes": "500000"})  # fmt: skip
    admin.create_topics([topic])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p, _offset, key, value, headers, ts in expected_records():
        producer.produce(TOPIC, value, key, partition=p, headers=list(headers), timestamp=ts)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        offsets = [TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()]
        committed = consumer.commit(offsets=offsets, asynchronous=False)
        assert committed is not None
        assert [tp.error for tp in committed] == [None] * len(COMMITTED)
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, count: int) -> list[Record]:
    """Every record of `topic` (assign + read from the start, no group), polled to a deadline."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: list[Record] = []
    deadline = Deadline(REPLICATION)
    try:
        while len(out) < count and not deadline.expired:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                continue
            pairs = cast(list[tuple[str, bytes | None]], message.headers() or [])
            headers = tuple((k, v or b"") for k, v in pairs)
            out.append((message.partition() or 0, message.offset() or 0, message.key(),
                        message.value(), headers, message.timestamp()[1]))  # fmt: skip
    finally:
        consumer.close()
    return sorted(out, key=lambda r: (r[0], r[1]))


def topic_partitions(bootstrap: str, topic: str) -> int | None:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


def topic_config(bootstrap: str, topic: str, key: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    entry = configs.get(key)
    return None if entry is None else str(entry.value)


def set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(10)


def committed(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def check_replication(source: str, target: str, mm2: MirrorMaker2, replica: str) -> None:
    def alive(value: object) -> object:
        mm2.check_alive()
        return value

    partitions = wait_until(lambda: alive(topic_partitions(target, replica)),
                            timeout=REPLICATION, what=f"{replica} on the target")  # fmt: skip
    assert partitions == PARTITIONS
    expected = [(p, o, k, v, h, ts) for p, o, k, v, h, ts in expected_records()]
    assert read_all(target, replica, len(expected)) == expected
    wait_until(lambda: alive(topic_config(target, replica, "retention.ms") == "3600000"),
               timeout=REPLICATION, what="retention.ms synced")  # fmt: skip
    assert topic_config(target, replica, "max.message.bytes") == "500000"
    set_topic_config(source, TOPIC, "retention.ms", "7200000")
    wait_until(lambda: alive(topic_config(target, replica, "retention.ms") == "7200000"),
               timeout=REPLICATION, what="a retention.ms change synced")  # fmt: skip
    translated = wait_until(
        lambda: alive(committed(target, replica) == COMMITTED),
        timeout=REPLICATION, what=f"{GROUP}'s offsets translated to {replica}",
    )  # fmt: skip
    assert translated


def test_strom_to_strom_default_policy(
    cluster_a: BrokerProcess, cluster_b: BrokerProcess, tmp_path: Path
) -> None:
    create_and_fill(cluster_a.bootstrap)
    mm2 = MirrorMaker2(
        tmp_path / "mm2",
        {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
        {"A->B": {"topics": "mm-.*", "groups": "mm-.*"}},
    )
    with mm2:
        try:
            check_replication(cluster_a.bootstrap, cluster_b.bootstrap, mm2, f"A.{TOPIC}")
            heartbeats = wait_until(lambda: topic_partitions(cluster_b.bootstrap, "heartbeats"),
                                    timeout=REPLICATION, what="heartbeats on B")  # fmt: skip
            assert heartbeats == 1
            assert topic_partitions(cluster_b.bootstrap, "A.checkpoints.internal") == 1
            assert topic_partitions(cluster_a.bootstrap, "mm2-offset-syncs.B.internal") == 1
        except BaseException as exc:
            raise AssertionError(f"{exc}\nMirrorMaker 2 log:\n{mm2.tail()}") from exc


def test_migration_from_apache_kafka_with_identity_policy(
    cluster_b: BrokerProcess, tmp_path: Path
) -> None:
    with ApacheKafka(tmp_path / "kafka") as kafka:
        create_and_fill(kafka.bootstrap)
        mm2 = MirrorMaker2(
            tmp_path / "mm2",
            {"kafka": kafka.bootstrap, "strom": cluster_b.bootstrap},
            {"kafka->strom": {"topics": "mm-.*", "groups": "mm-.*"}},
            {"replication.policy.class":
             "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"},
        )  # fmt: skip
        with mm2:
            try:
                check_replication(kafka.bootstrap, cluster_b.bootstrap, mm2, TOPIC)
            except BaseException as exc:
                raise AssertionError(
                    f"{exc}\nMirrorMaker 2 log:\n{mm2.tail()}\nApache Kafka log:\n{kafka.tail(30)}"
                ) from exc
