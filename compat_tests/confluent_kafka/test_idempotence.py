"""confluent-kafka: the idempotent producer (InitProducerId, sequence numbers, acks=all)."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Rec, by_partition, now_ms, topic_name
from strom.broker.testing.embedded import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 10_000


@pytest.mark.timeout(120)
def test_idempotent_producer_preserves_count_and_order(shared_broker: BrokerProcess) -> None:
    topic = topic_name("ck-idempotent")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, PARTITIONS)
    base = now_ms() - 1000
    expected = [
        Rec(p, i, f"{p}".encode(), f"{p}:{i:06d}".encode(), (), base + i)
        for i in range(PER_PARTITION)
        for p in range(PARTITIONS)
    ]
    producer = ck.producer(
        shared_broker.bootstrap,
        **{
            "enable.idempotence": True,
            "acks": "all",
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 2,
            "batch.num.messages": 500,
            "compression.type": "zstd",
        },
    )
    acked = ck.produce_all(producer, topic, expected)
    # Per partition, acknowledgements come in production order with consecutive offsets.
    for p in range(PARTITIONS):
        assert [o for q, o in acked if q == p] == list(range(PER_PARTITION))

    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = ck.consume(consumer, len(expected), timeout=60)
        assert len(got) == len(expected)
        assert by_partition(got) == by_partition(expected)
        for p in range(PARTITIONS):
            assert ck.watermarks(consumer, topic, p) == (0, PER_PARTITION)
        # nothing beyond: no duplicates were appended after the last acknowledged record
        assert consumer.consume(num_messages=10, timeout=0.3) == []
    finally:
        consumer.close()
