"""kafka-python: produce with keys, headers and every codec; consume by assign + seek; offsets."""

from __future__ import annotations

import pytest

from compat_tests.helpers import (
    CODECS,
    by_partition,
    now_ms,
    sample_records,
    stored_codecs,
    topic_name,
)
from compat_tests.kafka_python import kp
from compat_tests.kafka_python.kp import TopicPartition
from strom.broker.testing.embedded import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 60


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_keys_values_headers_timestamps(
    shared_broker: BrokerProcess, codec: str
) -> None:
    topic = topic_name(f"kp-{codec}")
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, PARTITIONS)
    # kafka-python only sends bytes header values (no null ones)
    expected = sample_records(
        PARTITIONS, PER_PARTITION, base_ts=now_ms() - 60_000, null_header_values=False
    )
    compression = None if codec == "none" else codec
    with kp.producer(
        shared_broker.bootstrap, compression_type=compression, linger_ms=20
    ) as producer:
        acked = kp.produce_all(producer, topic, expected)
    assert acked == [(r.partition, r.offset) for r in expected]
    assert stored_codecs(shared_broker.data_dir, topic) == {codec}

    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with kp.consumer(shared_broker.bootstrap) as consumer:
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        got = kp.consume(consumer, len(expected))
        assert by_partition(got) == by_partition(expected)
        assert consumer.beginning_offsets(partitions) == dict.fromkeys(partitions, 0)
        assert consumer.end_offsets(partitions) == dict.fromkeys(partitions, PER_PARTITION)


def test_non_idempotent_acks_1_producer(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-acks1")
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, 2)
    expected = sample_records(2, 30, base_ts=now_ms() - 1000, null_header_values=False)
    with kp.producer(shared_broker.bootstrap, acks=1, enable_idempotence=False) as producer:
        assert kp.produce_all(producer, topic, expected) == [
            (r.partition, r.offset) for r in expected
        ]
    with kp.consumer(shared_broker.bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        consumer.seek_to_beginning()
        assert by_partition(kp.consume(consumer, len(expected))) == by_partition(expected)


def test_assign_and_seek(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-seek")
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, 1)
    expected = sample_records(1, 100, base_ts=now_ms() - 60_000, null_header_values=False)
    tp = TopicPartition(topic, 0)
    with kp.producer(shared_broker.bootstrap) as producer:
        kp.produce_all(producer, topic, expected)
        with kp.consumer(shared_broker.bootstrap, max_poll_records=5) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 37)
            assert kp.consume(consumer, 5) == expected[37:42]
            assert consumer.position(tp) == 42

            consumer.seek(tp, 10)
            assert kp.consume(consumer, 3) == expected[10:13]

            consumer.seek(tp, 99)
            assert kp.consume(consumer, 1) == expected[99:]

            consumer.seek_to_end(tp)
            assert consumer.position(tp) == 100
            late = sample_records(1, 101, base_ts=now_ms(), null_header_values=False)[100:]
            assert kp.produce_all(producer, topic, late) == [(0, 100)]
            assert kp.consume(consumer, 1) == late

            consumer.seek_to_beginning(tp)
            assert kp.consume(consumer, 3) == expected[:3]


def test_offsets_for_times(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-times")
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, 2)
    base, step, count = now_ms() - 600_000, 1000, 40
    records = sample_records(2, count, base_ts=base, ts_step=step, null_header_values=False)
    with kp.producer(shared_broker.bootstrap, compression_type="gzip") as producer:
        kp.produce_all(producer, topic, records)
    partitions = [TopicPartition(topic, p) for p in range(2)]
    cases = {
        base - 5_000: 0,
        base: 0,
        base + 1: 1,
        base + 2_500: 3,
        base + (count - 1) * step: count - 1,
    }
    with kp.consumer(shared_broker.bootstrap) as consumer:
        for ts, offset in cases.items():
            found = consumer.offsets_for_times(dict.fromkeys(partitions, ts))
            for tp in partitions:
                assert found[tp] is not None, ts
                assert found[tp].offset == offset, ts
                assert found[tp].timestamp == base + offset * step, ts
        after = consumer.offsets_for_times(dict.fromkeys(partitions, base + count * step))
        assert after == dict.fromkeys(partitions)  # nothing at or after: None
