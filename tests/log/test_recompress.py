"""compression.type on append: the topic's codec wins over the producer's, as in Kafka."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from strom.storage import LogAppendError, LogConfig
from strom.storage.log.recompress import codec_level, target_codec
from strom.wire.errors import ErrorCode
from strom.wire.records import Codec, Record, TimestampType, build_batch, decode_batch, iter_batches
from tests.log.helpers import T0, open_log

RECORDS = [
    Record(b"k1", b"v1" * 40, (("h", b"1"),), T0),
    Record(None, b"v2" * 40, (), T0 + 5),
    Record(b"k3", None, (("h", None), ("g", b"")), T0 + 2),
]
TOPIC_CODECS = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}


def stored(log_path: Path, config: LogConfig, data: bytes | bytearray, now: int = T0 + 100):  # type: ignore[no-untyped-def]
    log = open_log(log_path, config)
    result = log.append(data, 3, now)
    raw = log.read(result.base_offset, 1 << 20).read_bytes()
    [(header, view)] = list(iter_batches(raw))
    return result, header, decode_batch(view, header)[1], raw


@pytest.mark.parametrize("topic", sorted(TOPIC_CODECS))
@pytest.mark.parametrize("sent", list(Codec))
def test_batches_are_stored_in_the_topic_codec(tmp_path: Path, topic: str, sent: Codec) -> None:
    config = LogConfig(compression_type=topic)
    data = build_batch(RECORDS, codec=sent, producer_id=4, producer_epoch=1, base_sequence=7)
    _, header, records, raw = stored(tmp_path / "t-0", config, data)
    assert header.codec is TOPIC_CODECS[topic]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (r.key, r.value, r.headers, r.timestamp) for r in RECORDS
    ]
    assert [r.offset for r in records] == [0, 1, 2]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4, 1, 7)
    assert header.partition_leader_epoch == 3
    assert header.max_timestamp == T0 + 5
    if sent is TOPIC_CODECS[topic]:
        assert raw[61:] == bytes(data[61:])  # untouched when the codecs agree


@pytest.mark.parametrize("sent", list(Codec))
def test_producer_keeps_whatever_codec_came(tmp_path: Path, sent: Codec) -> None:
    data = build_batch(RECORDS, codec=sent)
    _, header, _, raw = stored(tmp_path / "t-0", LogConfig(compression_type="producer"), data)
    assert header.codec is sent
    assert raw[61:] == bytes(data[61:])


def test_recompression_and_log_append_time(tmp_path: Path) -> None:
    config = LogConfig(compression_type="lz4", message_timestamp_type="LogAppendTime")
    result, header, records, _ = stored(tmp_path / "t-0", config, build_batch(RECORDS), now=T0 + 99)
    assert result.log_append_time_ms == T0 + 99
    assert header.codec is Codec.LZ4
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in records] == [T0 + 99] * 3


def test_idempotent_retries_are_still_recognised(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(compression_type="zstd"))
    data = build_batch(RECORDS, producer_id=9, producer_epoch=0, base_sequence=0)
    first = log.append(data, 0, T0)
    again = log.append(data, 0, T0)
    assert again.duplicate
    assert again.base_offset == first.base_offset
    assert log.log_end_offset == 3


def test_sizes_are_checked_again_after_recompression(tmp_path: Path) -> None:
    big = [Record(b"k", b"a" * 20_000, (), T0)]
    packed = build_batch(big, codec=Codec.GZIP)
    assert len(packed) < 1000
    config = LogConfig(compression_type="uncompressed", max_message_bytes=10_000)
    log = open_log(tmp_path / "t-0", config)
    with pytest.raises(LogAppendError) as raised:
        log.append(packed, 0, T0)
    assert raised.value.error == ErrorCode.MESSAGE_TOO_LARGE
    config = dataclasses.replace(config, max_message_bytes=10**6, segment_bytes=15_000)
    log.update_config(config)
    with pytest.raises(LogAppendError) as raised:
        log.append(packed, 0, T0)
    assert raised.value.error == ErrorCode.RECORD_LIST_TOO_LARGE
    assert log.log_end_offset == 0


def test_codec_levels_follow_the_topic() -> None:
    config = LogConfig(compression_type="gzip", compression_gzip_level=9, compression_zstd_level=7)
    assert target_codec(config) is Codec.GZIP
    assert target_codec(LogConfig()) is None
    assert codec_level(config, Codec.GZIP) == 9
    assert codec_level(LogConfig(), Codec.GZIP) is None
    assert codec_level(config, Codec.ZSTD) == 7
    assert codec_level(LogConfig(), Codec.LZ4) is None
    assert codec_level(LogConfig(compression_lz4_level=12), Codec.LZ4) == 12
