"""Durability: acknowledged records survive `kill -9` and a clean (SIGTERM) restart.

One `strom serve` process and its data directory: produce 100,000 records with acks=all over
several partitions (confluent-kafka), kill the broker with SIGKILL, restart it on the same data
directory and port, and read everything back: every acknowledged record is there, in order, at
the offset it was acknowledged with. Then the same across a clean restart, and the log ends are
where new records continue.
"""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Rec, by_partition, now_ms, topic_name
from strom.broker.testing.embedded import BrokerProcess

PARTITIONS = 4
TOTAL = 100_000
PER_PARTITION = TOTAL // PARTITIONS


def make_records(base_ts: int) -> list[Rec]:
    out = []
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            headers = (("seq", str(i).encode()),) if i % 10 == 0 else ()
            value = f"partition {p} record {i:06d} ".encode() + bytes([i % 256]) * (i % 50)
            out.append(Rec(p, i, f"k{p}-{i}".encode(), value, headers, base_ts + i))
    return out


def read_back(broker: BrokerProcess, topic: str, expected: list[Rec]) -> None:
    consumer = ck.consumer(broker.bootstrap, **{"fetch.max.bytes": 8 * 1024 * 1024})
    try:
        for p in range(PARTITIONS):
            assert ck.watermarks(consumer, topic, p) == (0, PER_PARTITION), p
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = ck.consume(consumer, len(expected), timeout=90)
        assert len(got) == len(expected)
        assert by_partition(got) == by_partition(expected)
        assert consumer.consume(num_messages=10, timeout=0.2) == []
    finally:
        consumer.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_acknowledged_records_survive_kill_9_and_clean_restart(strom_broker: BrokerProcess) -> None:
    topic = topic_name("durability")
    ck.create_topic(ck.admin(strom_broker.bootstrap), topic, PARTITIONS)
    expected = make_records(now_ms() - 60_000)
    producer = ck.producer(
        strom_broker.bootstrap,
        **{"acks": "all", "linger.ms": 10, "batch.num.messages": 5000, "compression.type": "lz4"},
    )
    acked = ck.produce_all(producer, topic, expected)
    assert len(acked) == TOTAL
    for p in range(PARTITIONS):
        assert [o for q, o in acked if q == p] == list(range(PER_PARTITION))
    del producer

    strom_broker.restart(clean=False)  # SIGKILL: no shutdown, no final flush
    read_back(strom_broker, topic, expected)

    assert strom_broker.stop() == 0  # SIGTERM: a clean shutdown exits 0
    strom_broker.start(same_port=True)
    read_back(strom_broker, topic, expected)

    # the recovered log ends are where new records go
    late = [
        Rec(p, PER_PARTITION, b"late", b"after restarts", (), now_ms()) for p in range(PARTITIONS)
    ]
    assert sorted(ck.produce_all(ck.producer(strom_broker.bootstrap), topic, late)) == [
        (p, PER_PARTITION) for p in range(PARTITIONS)
    ]
