"""Per-topic storage configs: visible through DescribeConfigs, changed by
IncrementalAlterConfigs, and in effect on the next request, without a restart."""

from __future__ import annotations

import time

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.storage import PartitionLog
from strom.wire.errors import ErrorCode
from strom.wire.records import Codec, TimestampType, decode_batch, iter_batches
from tests.broker.test_describe_configs import describe_one, set_configs
from tests.broker.test_produce_helpers import (
    batch,
    create_topic,
    fetch_one,
    produce,
    state_of,
    wait_for,
)

pytestmark = pytest.mark.trio

TOPIC = 2
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.ms": "604800000",
}
CHANGES = {
    "cleanup.policy": ("compact,delete", "cleanup_policy", ("compact", "delete")),
    "compression.type": ("zstd", "compression_type", "zstd"),
    "delete.retention.ms": ("1000", "delete_retention_ms", 1000),
    "flush.messages": ("3", "flush_messages", 3),
    "flush.ms": ("250", "flush_ms", 250),
    "max.compaction.lag.ms": ("900000", "max_compaction_lag_ms", 900000),
    "max.message.bytes": ("5000", "max_message_bytes", 5000),
    "message.timestamp.after.max.ms": ("1000", "message_timestamp_after_max_ms", 1000),
    "message.timestamp.before.max.ms": ("2000", "message_timestamp_before_max_ms", 2000),
    "message.timestamp.type": ("LogAppendTime", "message_timestamp_type", "LogAppendTime"),
    "min.cleanable.dirty.ratio": ("0.25", "min_cleanable_dirty_ratio", 0.25),
    "min.compaction.lag.ms": ("5000", "min_compaction_lag_ms", 5000),
    "retention.bytes": ("123456", "retention_bytes", 123456),
    "retention.ms": ("3600000", "retention_ms", 3600000),
    "segment.bytes": ("65536", "segment_bytes", 65536),
    "segment.index.bytes": ("4096", "segment_index_bytes", 4096),
    "segment.ms": ("60000", "segment_ms", 60000),
}


def log_of(broker: EmbeddedBroker, topic: str) -> PartitionLog:
    found = state_of(broker).logs.get(topic, 0)
    assert found is not None
    return found


def stored(data: bytes | bytearray | memoryview | None):  # type: ignore[no-untyped-def]
    """(header, records) of each fetched batch."""
    return [decode_batch(view, h) for h, view in iter_batches(memoryview(bytes(data or b"")))]


def now_ms() -> int:
    return int(time.time() * 1000)


async def test_every_storage_key_is_described_and_changed_live(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "cfg")
    described = await describe_one(client, TOPIC, "cfg", *DEFAULTS)
    assert {k: e.value for k, e in described.items()} == DEFAULTS
    assert all(not e.read_only for e in described.values())
    await set_configs(
        client, TOPIC, "cfg", **{k.replace(".", "_"): v for k, (v, _, _) in CHANGES.items()}
    )
    described = await describe_one(client, TOPIC, "cfg", *CHANGES)
    assert {k: (e.value, e.config_source) for k, e in described.items()} == {
        k: (v, DYNAMIC_TOPIC_CONFIG) for k, (v, _, _) in CHANGES.items()
    }
    config = log_of(broker, "cfg").config
    for key, (_, attribute, value) in CHANGES.items():
        assert getattr(config, attribute) == value, key


@pytest.mark.parametrize(
    ("codec", "expected"),
    [
        ("gzip", Codec.GZIP),
        ("snappy", Codec.SNAPPY),
        ("lz4", Codec.LZ4),
        ("zstd", Codec.ZSTD),
        ("uncompressed", Codec.NONE),
        ("producer", Codec.SNAPPY),
    ],
)
async def test_compression_type_recompresses_on_append(
    broker: EmbeddedBroker, client: KafkaClient, codec: str, expected: Codec
) -> None:
    await create_topic(broker, "z")
    await set_configs(client, TOPIC, "z", compression_type=codec)
    sent = batch([b"one" * 30, b"two" * 30], ts=now_ms(), codec=Codec.SNAPPY, pid=-1)
    p = await produce(client, "z", sent)
    assert p.error_code == ErrorCode.NONE
    [(header, records)] = stored((await fetch_one(client, "z", 0)).records)
    assert header.codec is expected
    assert [r.value for r in records] == [b"one" * 30, b"two" * 30]
    assert [r.key for r in records] == [b"k0", b"k1"]


async def test_log_append_time_and_timestamp_bounds(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "ts")
    old = now_ms() - 10_000
    assert (await produce(client, "ts", batch([b"a"], ts=old))).error_code == ErrorCode.NONE
    await set_configs(client, TOPIC, "ts", message_timestamp_before_max_ms="5000")
    p = await produce(client, "ts", batch([b"b", b"c"], ts=old))
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in p.record_errors] == [0, 1]
    await set_configs(client, TOPIC, "ts", message_timestamp_after_max_ms="1000")
    p = await produce(client, "ts", batch([b"d"], ts=now_ms() + 60_000))
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    await set_configs(client, TOPIC, "ts", message_timestamp_type="LogAppendTime")
    before = now_ms()
    p = await produce(client, "ts", batch([b"e"], ts=old))  # no bounds for LogAppendTime
    assert p.error_code == ErrorCode.NONE
    assert before <= p.log_append_time_ms <= now_ms()
    [_, (header, records)] = stored((await fetch_one(client, "ts", 0)).records)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert records[0].timestamp == p.log_append_time_ms


async def test_size_limits_and_segment_rolls(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "seg")
    log = log_of(broker, "seg")
    await set_configs(client, TOPIC, "seg", max_message_bytes="200")
    p = await produce(client, "seg", batch([b"x" * 300]))
    assert p.error_code == ErrorCode.MESSAGE_TOO_LARGE
    await set_configs(client, TOPIC, "seg", max_message_bytes="100000", segment_bytes="1000")
    for _ in range(10):
        assert (await produce(client, "seg", batch([b"y" * 200]))).error_code == ErrorCode.NONE
    assert len(log.segments) >= 3
    assert all(s.size_bytes <= 1000 for s in log.segments)
    p = await produce(client, "seg", batch([b"z" * 1200]))
    assert p.error_code == ErrorCode.RECORD_LIST_TOO_LARGE
    # segment.index.bytes: room for two index entries, one every batch (index.interval.bytes 0).
    await set_configs(
        client,
        TOPIC,
        "seg",
        segment_bytes="1000000",
        segment_index_bytes="24",
        index_interval_bytes="0",
    )
    rolled = len(log.segments)
    for _ in range(8):
        await produce(client, "seg", batch([b"w"]))
    assert len(log.segments) >= rolled + 2
    # segment.ms: the active segment rolls once its first batch is older than that.
    await set_configs(client, TOPIC, "seg", segment_ms="1000", segment_index_bytes="10485760")
    await produce(client, "seg", batch([b"t0"], ts=now_ms()))
    rolled = len(log.segments)
    await produce(client, "seg", batch([b"t1"], ts=now_ms() + 2000))
    assert len(log.segments) == rolled + 1


async def test_flush_messages_and_flush_ms(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "fl")
    log = log_of(broker, "fl")
    await produce(client, "fl", batch([b"a"]))
    assert log not in state_of(broker).logs.flush_due(int(time.time() * 1000))
    assert log.recovery_point == 0  # the defaults leave flushing to the OS
    await set_configs(client, TOPIC, "fl", flush_messages="1")
    await produce(client, "fl", batch([b"b"]))
    assert log.recovery_point == log.log_end_offset == 2  # acked only once fsynced
    await set_configs(client, TOPIC, "fl", flush_messages="1000", flush_ms="50")
    await produce(client, "fl", batch([b"c"]))
    assert log.recovery_point == 2
    await wait_for(lambda: log.recovery_point == 3, "the flush loop to honour flush.ms")


async def test_zstd_topics_refuse_fetches_before_v10(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "zs", configs={"compression.type": "zstd"})
    assert (await produce(client, "zs", batch([b"a"]), version=3)).error_code == ErrorCode.NONE
    old = await fetch_one(client, "zs", 0, version=9)
    assert (old.error_code, old.high_watermark, old.records) == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        -1,
        b"",
    )
    [(header, _)] = stored((await fetch_one(client, "zs", 0, version=10)).records)
    assert header.codec is Codec.ZSTD
