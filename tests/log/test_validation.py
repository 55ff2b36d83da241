"""Append validation: every rejection has Kafka's error code and leaves the log unchanged."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from strom.storage import AppendOrigin, LogAppendError, LogConfig, PartitionLog
from strom.wire.errors import ErrorCode
from strom.wire.records import (
    Codec,
    ControlType,
    EndTxnMarker,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    encode_record,
    iter_batches,
)
from tests.log.helpers import T0, batch, open_log, read_everything
from tests.records.records_strategies import raw_batch

HOUR = 3_600_000


def rejects(
    log: PartitionLog, data: bytes | bytearray, code: ErrorCode, now: int = T0
) -> LogAppendError:
    before = (log.log_end_offset, log.size_bytes(), read_everything(log))
    with pytest.raises(LogAppendError) as info:
        log.append(data, 0, now)
    assert info.value.error == code, info.value.message
    assert (log.log_end_offset, log.size_bytes(), read_everything(log)) == before
    return info.value


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=500, segment_bytes=2000))
    log.append(batch([b"seed"]), 0, T0)
    return log


def mutate(data: bytearray, fn: Callable[[bytearray], None]) -> bytearray:
    fn(data)
    return data


def test_crc_mismatch_is_corrupt_message(log: PartitionLog) -> None:
    data = batch([b"hello"])
    data[-1] ^= 0xFF
    rejects(log, data, ErrorCode.CORRUPT_MESSAGE)


def test_truncated_or_garbage_input_is_corrupt_message(log: PartitionLog) -> None:
    rejects(log, batch()[:-3], ErrorCode.CORRUPT_MESSAGE)
    rejects(log, batch() + b"\x00" * 5, ErrorCode.CORRUPT_MESSAGE)
    rejects(
        log, mutate(batch(), lambda b: struct.pack_into(">i", b, 8, 10)), ErrorCode.CORRUPT_MESSAGE
    )


def test_bad_magic_is_invalid_record(log: PartitionLog) -> None:
    rejects(log, mutate(batch(), lambda b: b.__setitem__(16, 1)), ErrorCode.INVALID_RECORD)


def test_batch_over_max_message_bytes(log: PartitionLog) -> None:
    rejects(log, batch([b"x" * 600]), ErrorCode.MESSAGE_TOO_LARGE)


def test_append_over_segment_bytes_is_record_list_too_large(log: PartitionLog) -> None:
    data = b"".join(batch([b"x" * 400]) for _ in range(6))
    rejects(log, data, ErrorCode.RECORD_LIST_TOO_LARGE)


def test_empty_append_is_invalid_record(log: PartitionLog) -> None:
    rejects(log, b"", ErrorCode.INVALID_RECORD)


def test_client_batches_must_have_base_offset_zero_and_consistent_counts(log: PartitionLog) -> None:
    rejects(
        log, mutate(batch(), lambda b: struct.pack_into(">q", b, 0, 5)), ErrorCode.INVALID_RECORD
    )
    gappy = build_batch([Record(b"k", b"a", (), T0, 0), Record(b"k", b"b", (), T0, 2)])
    rejects(log, gappy, ErrorCode.INVALID_RECORD)


def test_record_count_zero_is_invalid_record(log: PartitionLog) -> None:
    from strom.wire.records import compute_crc

    def zero(b: bytearray) -> None:
        struct.pack_into(">i", b, 57, 0)
        struct.pack_into(">I", b, 17, compute_crc(b))

    rejects(log, mutate(batch(), zero), ErrorCode.INVALID_RECORD)


def test_clients_may_not_write_control_batches(log: PartitionLog) -> None:
    marker = build_control_batch(
        EndTxnMarker(ControlType.COMMIT, 3), producer_id=9, producer_epoch=0, timestamp=T0
    )
    rejects(log, marker, ErrorCode.INVALID_RECORD)
    # ...but a coordinator may.
    log.append(batch([b"t"], pid=9, epoch=0, seq=0, transactional=True), 0, T0)
    result = log.append(marker, 0, T0, origin=AppendOrigin.COORDINATOR)
    assert result.base_offset == 2
    (info,) = log.producers()
    assert info.coordinator_epoch == 3
    assert info.current_txn_start_offset == -1


def test_idempotent_batch_needs_a_sequence(log: PartitionLog) -> None:
    rejects(log, batch(pid=5, epoch=0, seq=-1), ErrorCode.INVALID_RECORD)


def test_timestamp_too_far_in_future(log: PartitionLog) -> None:
    error = rejects(log, batch([b"a", b"b"], ts=T0 + HOUR), ErrorCode.INVALID_TIMESTAMP)
    assert [i for i, _ in error.record_errors] == [1]
    log.append(batch([b"ok"], ts=T0 + HOUR - 1), 0, T0)


def test_timestamp_too_old_when_before_max_is_set(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000))
    error = rejects(log, batch([b"a", b"b", b"c"], ts=T0 - 1001), ErrorCode.INVALID_TIMESTAMP)
    assert [i for i, _ in error.record_errors] == [0]
    log.append(batch([b"ok"], ts=T0 - 1000), 0, T0)


def test_producer_set_log_append_time_is_invalid_timestamp(log: PartitionLog) -> None:
    lat = build_batch(
        [Record(b"k", b"v", (), T0)], timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=T0
    )
    rejects(log, lat, ErrorCode.INVALID_TIMESTAMP)


def test_compacted_topic_needs_keys(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(cleanup_policy=("compact",)))
    error = rejects(log, batch([b"a", b"b"], keys=[b"k", None]), ErrorCode.INVALID_RECORD)
    assert error.record_errors == [(1, "compacted topic cannot accept a record without a key")]
    log.append(batch([b"a"], keys=[b"k"]), 0, T0)


def test_log_append_time_overwrites_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append(batch([b"a", b"b"], ts=5), 0, T0 + 42)
    assert result.log_append_time_ms == T0 + 42
    data = log.read(0, 1 << 20).read_bytes()
    ((header, _),) = list(iter_batches(data, allow_partial=False, check_crc=True))
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == T0 + 42
    # Far-off CreateTime values are not checked: the broker's clock wins.
    log.append(batch(ts=0), 0, T0)


# --- poison batches: a correct CRC around records that are garbage (issue 10) --------------


@pytest.mark.parametrize(
    "records",
    [
        b"\x0c\x00\x00\x00\x03\x01\x00",  # key length -2
        b"\xff\xff\xff\xff\xff\x01",  # a 6-byte varint
        b"\x40\x00\x00\x00\x01\x01\x00",  # a length past the batch end
        b"\x0c\x00\x00\x02\x01\x01\x00",  # offset delta 1 for the first record
        b"\x0c\x00\x00\x00\x01\x01\x00\x00",  # a byte after the last record
    ],
)
def test_poison_records_are_invalid_record(log: PartitionLog, records: bytes) -> None:
    error = rejects(log, raw_batch(records), ErrorCode.INVALID_RECORD)
    assert error.record_errors == []  # as Kafka's InvalidRecordException: no per-record list


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
def test_a_payload_that_does_not_decompress_is_corrupt_message(
    log: PartitionLog, codec: Codec
) -> None:
    good = build_batch([Record(None, b"v" * 50, (), T0)], codec=codec)
    payload = bytearray(good[61:])
    payload[len(payload) // 2 :] = b"\xa5" * (len(payload) - len(payload) // 2)
    rejects(log, raw_batch(bytes(payload), attributes=codec), ErrorCode.CORRUPT_MESSAGE)


def test_a_decompression_bomb_is_message_too_large(tmp_path: Path) -> None:
    """80 MiB of well-formed records zstd-compressed into a few KiB (a valid CRC too)."""
    log = open_log(tmp_path / "t-0", LogConfig())
    log.append(batch([b"seed"]), 0, T0)
    zstd = zstandard.ZstdCompressor().compressobj()
    payload = b""
    for index in range(80):
        body = bytearray()
        encode_record(body, index, 0, None, bytes((1 << 20) - 16))
        payload += zstd.compress(bytes(body))
    payload += zstd.flush()
    bomb = raw_batch(payload, count=80, last_offset_delta=79, attributes=Codec.ZSTD)
    assert len(bomb) < LogConfig().max_message_bytes
    rejects(log, bomb, ErrorCode.MESSAGE_TOO_LARGE)
