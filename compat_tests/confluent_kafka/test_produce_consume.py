"""confluent-kafka: produce with keys, headers and every codec; consume by assign + seek."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import (
    CODECS,
    Deadline,
    Rec,
    by_partition,
    now_ms,
    sample_records,
    stored_codecs,
    topic_name,
)
from strom.broker.testing.embedded import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 60


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_keys_values_headers_timestamps(
    shared_broker: BrokerProcess, codec: str
) -> None:
    topic = topic_name(f"ck-{codec}")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, PARTITIONS)
    expected = sample_records(PARTITIONS, PER_PARTITION, base_ts=now_ms() - 60_000)

    producer = ck.producer(shared_broker.bootstrap, **{"compression.type": codec, "linger.ms": 20})
    acked = ck.produce_all(producer, topic, expected)
    assert sorted(acked) == [(r.partition, r.offset) for r in expected]
    assert stored_codecs(shared_broker.data_dir, topic) == {codec}

    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = ck.consume(consumer, len(expected))
        assert by_partition(got) == by_partition(expected)
        for p in range(PARTITIONS):
            assert ck.watermarks(consumer, topic, p) == (0, PER_PARTITION)
    finally:
        consumer.close()


def test_topic_compression_type_recompresses(shared_broker: BrokerProcess) -> None:
    """compression.type=zstd on the topic: lz4 batches are stored as zstd, records unchanged."""
    topic = topic_name("ck-recompress")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 2, {"compression.type": "zstd"})
    expected = sample_records(2, 40, base_ts=now_ms() - 60_000)
    producer = ck.producer(shared_broker.bootstrap, **{"compression.type": "lz4", "linger.ms": 20})
    ck.produce_all(producer, topic, expected)
    assert stored_codecs(shared_broker.data_dir, topic) == {"zstd"}
    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        assert by_partition(ck.consume(consumer, len(expected))) == by_partition(expected)
    finally:
        consumer.close()


def test_assign_at_offset_then_seek(shared_broker: BrokerProcess) -> None:
    topic = topic_name("ck-seek")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 1)
    expected = sample_records(1, 100, base_ts=now_ms() - 60_000)
    producer = ck.producer(shared_broker.bootstrap)
    ck.produce_all(producer, topic, expected)

    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, 37)])
        assert ck.consume(consumer, 5) == expected[37:42]
        position = consumer.position([TopicPartition(topic, 0)])
        assert [tp.offset for tp in position] == [42]

        consumer.seek(TopicPartition(topic, 0, 10))
        assert ck.consume(consumer, 3) == expected[10:13]

        consumer.seek(TopicPartition(topic, 0, 99))
        assert ck.consume(consumer, 1) == expected[99:]

        # at the log end: the next record produced is the next one consumed. (A logical
        # OFFSET_END seek would race with that produce: it is resolved asynchronously.)
        consumer.seek(TopicPartition(topic, 0, 100))
        assert consumer.consume(num_messages=1, timeout=0.3) == []
        late = sample_records(1, 101, base_ts=now_ms())[100:]
        assert ck.produce_all(producer, topic, late) == [(0, 100)]
        assert ck.consume(consumer, 1) == late

        consumer.seek(TopicPartition(topic, 0, OFFSET_BEGINNING))
        assert ck.consume(consumer, 3) == expected[:3]
    finally:
        consumer.close()


def test_assign_from_beginning_on_an_empty_partition_then_tail(
    shared_broker: BrokerProcess,
) -> None:
    topic = topic_name("ck-tail")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 2)
    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        assert consumer.consume(num_messages=10, timeout=0.5) == []
        expected = sample_records(2, 20, base_ts=now_ms() - 1000)
        ck.produce_all(ck.producer(shared_broker.bootstrap), topic, expected)
        assert by_partition(ck.consume(consumer, len(expected))) == by_partition(expected)
    finally:
        consumer.close()


def test_log_append_time_topic(shared_broker: BrokerProcess) -> None:
    """message.timestamp.type=LogAppendTime: the broker's clock replaces the producer's."""
    topic = topic_name("ck-append-time")
    ck.create_topic(
        ck.admin(shared_broker.bootstrap), topic, 1, {"message.timestamp.type": "LogAppendTime"}
    )
    records = sample_records(1, 20, base_ts=now_ms() - 3_600_000)
    before = now_ms()
    ck.produce_all(
        ck.producer(shared_broker.bootstrap, **{"compression.type": "gzip"}), topic, records
    )
    after = now_ms()
    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[int, int, int]] = []
        deadline = Deadline(ck.TIMEOUT)
        while len(got) < len(records) and not deadline.expired:
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                assert msg.error() is None, msg.error()
                offset = msg.offset()
                assert offset is not None
                ts_type, ts = msg.timestamp()
                got.append((offset, ts_type, ts))
                assert msg.value() == records[offset].value
    finally:
        consumer.close()
    assert [offset for offset, _, _ in got] == list(range(len(records)))
    for _, ts_type, ts in got:
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        # the broker's clock at append; a little slack for clock granularity
        assert before - 1000 <= ts <= after + 1000


def test_large_values_across_fetches(shared_broker: BrokerProcess) -> None:
    """Values near 1 MiB: batches larger than a fetch partition limit still come back whole."""
    topic = topic_name("ck-large")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 1)
    base = now_ms() - 1000
    expected = [
        Rec(0, i, f"k{i}".encode(), bytes([i]) * (900_000 + i), (), base + i) for i in range(6)
    ]
    ck.produce_all(
        ck.producer(shared_broker.bootstrap, **{"compression.type": "none"}), topic, expected
    )
    consumer = ck.consumer(shared_broker.bootstrap, **{"max.partition.fetch.bytes": 100_000})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert ck.consume(consumer, len(expected)) == expected
    finally:
        consumer.close()
