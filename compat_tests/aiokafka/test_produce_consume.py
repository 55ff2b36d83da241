"""aiokafka: produce with keys, headers and every codec; consume by assign + seek; offsets."""

from __future__ import annotations

import pytest

from compat_tests.aiokafka import ak
from compat_tests.aiokafka.ak import TopicPartition
from compat_tests.helpers import (
    CODECS,
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
    bootstrap = shared_broker.bootstrap
    topic = topic_name(f"ak-{codec}")
    # aiokafka only sends bytes header values (no null ones)
    expected = sample_records(
        PARTITIONS, PER_PARTITION, base_ts=now_ms() - 60_000, null_header_values=False
    )
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(admin, topic, PARTITIONS)
        compression = None if codec == "none" else codec
        async with ak.producer(bootstrap, compression_type=compression, linger_ms=20) as producer:
            acked = await ak.produce_all(producer, topic, expected)
        assert acked == [(r.partition, r.offset) for r in expected]
        assert stored_codecs(shared_broker.data_dir, topic) == {codec}

        async with ak.consumer(bootstrap) as consumer:
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            got = await ak.consume(consumer, len(expected))
            assert by_partition(got) == by_partition(expected)
            assert await consumer.beginning_offsets(partitions) == dict.fromkeys(partitions, 0)
            assert await consumer.end_offsets(partitions) == dict.fromkeys(
                partitions, PER_PARTITION
            )

    ak.run(test)


def test_idempotent_producer(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-idempotent")
    expected = sample_records(2, 200, base_ts=now_ms() - 1000, null_header_values=False)

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(admin, topic, 2)
        async with ak.producer(bootstrap, enable_idempotence=True) as producer:
            acked = await ak.produce_all(producer, topic, expected)
        assert acked == [(r.partition, r.offset) for r in expected]
        got = await ak.read_from_start(bootstrap, topic, 2, len(expected))
        assert by_partition(got) == by_partition(expected)

    ak.run(test)


def test_assign_and_seek(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-seek")
    expected = sample_records(1, 100, base_ts=now_ms() - 60_000, null_header_values=False)
    tp = TopicPartition(topic, 0)

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(admin, topic, 1)
        async with ak.producer(bootstrap) as producer:
            await ak.produce_all(producer, topic, expected)
            async with ak.consumer(bootstrap) as consumer:
                consumer.assign([tp])
                consumer.seek(tp, 37)
                assert await ak.consume(consumer, 5) == expected[37:42]
                assert await consumer.position(tp) == 42

                consumer.seek(tp, 10)
                assert await ak.consume(consumer, 3) == expected[10:13]

                consumer.seek(tp, 99)
                assert await ak.consume(consumer, 1) == expected[99:]

                await consumer.seek_to_end(tp)
                assert await consumer.position(tp) == 100
                late = sample_records(1, 101, base_ts=now_ms(), null_header_values=False)[100:]
                assert await ak.produce_all(producer, topic, late) == [(0, 100)]
                assert await ak.consume(consumer, 1) == late

                await consumer.seek_to_beginning(tp)
                assert await ak.consume(consumer, 3) == expected[:3]

    ak.run(test)


def test_offsets_for_times(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-times")
    base, step, count = now_ms() - 600_000, 1000, 40
    records = sample_records(2, count, base_ts=base, ts_step=step, null_header_values=False)
    partitions = [TopicPartition(topic, p) for p in range(2)]
    cases = {
        base - 5_000: 0,
        base: 0,
        base + 1: 1,
        base + 2_500: 3,
        base + (count - 1) * step: count - 1,
    }

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(admin, topic, 2)
        async with ak.producer(bootstrap, compression_type="snappy") as producer:
            await ak.produce_all(producer, topic, records)
        async with ak.consumer(bootstrap) as consumer:
            for ts, offset in cases.items():
                found = await consumer.offsets_for_times(dict.fromkeys(partitions, ts))
                for tp in partitions:
                    assert found[tp] is not None, ts
                    assert (found[tp].offset, found[tp].timestamp) == (
                        offset,
                        base + offset * step,
                    ), ts
            after = await consumer.offsets_for_times(dict.fromkeys(partitions, base + count * step))
            assert after == dict.fromkeys(partitions)

    ak.run(test)
