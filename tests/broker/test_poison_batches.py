"""Poison batches over the wire: a correct CRC around garbage records is refused, never acked.

Issue 10: such batches used to be appended with error 0, after which confluent-kafka
consumers stopped at that offset and kafka-python raised CorruptRecordError. Now the broker
answers Kafka's error and nothing lands, so stock consumers read straight past the attempt.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
import trio
import zstandard

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.records import Codec, Record, build_batch, compress, encode_record
from tests.broker.test_produce_helpers import create_topic, fetch_one, produce, records_of
from tests.broker.test_produce_kafka_python import TIMEOUT_S, bootstrap  # noqa: F401 (fixture)
from tests.records.records_strategies import raw_batch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, TopicPartition


def _bomb() -> bytearray:
    """80 MiB of well-formed records, zstd-compressed into a few KiB."""
    zstd = zstandard.ZstdCompressor().compressobj()
    payload = b""
    for index in range(80):
        body = bytearray()
        encode_record(body, index, 0, None, bytes((1 << 20) - 16))
        payload += zstd.compress(bytes(body))
    return raw_batch(payload + zstd.flush(), count=80, last_offset_delta=79, attributes=Codec.ZSTD)


def poison_batches() -> Iterator[tuple[str, bytes | bytearray, ErrorCode]]:
    yield "key length -2", raw_batch(b"\x0c\x00\x00\x00\x03\x01\x00"), ErrorCode.INVALID_RECORD
    yield "overlong varint", raw_batch(b"\xff\xff\xff\xff\xff\x01"), ErrorCode.INVALID_RECORD
    twins = _record(0, b"a") + _record(0, b"b")
    yield (
        "offset deltas 0, 0",
        raw_batch(twins, count=2, last_offset_delta=1),
        ErrorCode.INVALID_RECORD,
    )
    truncated = compress(Codec.LZ4, _record(0, b"x" * 64))[:-3]  # its end mark cut short
    yield (
        "lz4 that does not decode",
        raw_batch(truncated, attributes=Codec.LZ4),
        ErrorCode.CORRUPT_MESSAGE,
    )
    yield "80 MiB bomb", _bomb(), ErrorCode.MESSAGE_TOO_LARGE


def _record(index: int, value: bytes) -> bytes:
    out = bytearray()
    encode_record(out, index, 0, None, value)
    return bytes(out)


POISON = [(name, bytes(data), code) for name, data, code in poison_batches()]


@pytest.mark.trio
@pytest.mark.parametrize(("name", "data", "code"), POISON, ids=[p[0] for p in POISON])
async def test_poison_is_refused_with_kafkas_error_and_nothing_lands(
    broker: EmbeddedBroker, client: KafkaClient, name: str, data: bytes, code: ErrorCode
) -> None:
    await create_topic(broker, "t")
    before = bytes(build_batch([Record(None, b"before", (), 0)]))
    assert (await produce(client, "t", before)).error_code == ErrorCode.NONE
    answer = await produce(client, "t", data, version=9)
    assert answer.error_code == code, name
    assert (answer.base_offset, answer.record_errors, answer.error_message) == (-1, [], None)
    assert answer.log_start_offset == (0 if code == ErrorCode.INVALID_RECORD else -1)
    after = await produce(client, "t", bytes(build_batch([Record(None, b"after", (), 0)])))
    assert (after.error_code, after.base_offset) == (ErrorCode.NONE, 1)
    fetched = await fetch_one(client, "t", 0)
    assert records_of(fetched.records) == [(0, b"before"), (1, b"after")]


async def _send_poison(servers: str, topic: str) -> list[int]:
    client = await KafkaClient.connect(servers)
    try:
        return [(await produce(client, topic, data)).error_code for _, data, _ in POISON]
    finally:
        await client.aclose()


def _consume_confluent(servers: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": servers, "group.id": "poison", "enable.auto.commit": False}
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        got: list[tuple[int, bytes]] = []
        for _ in range(TIMEOUT_S * 2):
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            offset, value = message.offset(), message.value()
            assert offset is not None
            assert value is not None
            got.append((offset, value))
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


def _consume_kafka_python(servers: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(
        bootstrap_servers=servers, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=200
    )
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        got: list[Any] = []
        for _ in range(TIMEOUT_S * 2):
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
            if len(got) >= count:
                break
        return [(r.offset, r.value) for r in got]
    finally:
        consumer.close()


def test_stock_consumers_read_past_the_refused_poison(bootstrap: str) -> None:  # noqa: F811
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce("poisoned", b"before", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    codes = trio.run(_send_poison, bootstrap, "poisoned")
    assert codes == [code for _, _, code in POISON]
    producer.produce("poisoned", b"after", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    expected = [(0, b"before"), (1, b"after")]
    assert _consume_confluent(bootstrap, "poisoned", 2) == expected
    assert _consume_kafka_python(bootstrap, "poisoned", 2) == expected
