"""Batch header parsing, iteration over concatenated batches, CRC checks and in-place patches."""

from __future__ import annotations

import pytest

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import (
    HEADER_SIZE,
    BatchHeader,
    Codec,
    Record,
    TimestampType,
    build_batch,
    compute_crc,
    decode_batch,
    iter_batches,
    patch_base_offset,
    patch_leader_epoch,
    set_max_timestamp,
    validate_batch,
    verify_crc,
)

from .records_strategies import raw_batch


def _batch(n: int = 3, **kwargs: object) -> bytearray:
    records = [Record(b"k%d" % i, b"v%d" % i, (), 1000 + i) for i in range(n)]
    return build_batch(records, **kwargs)  # type: ignore[arg-type]


def test_header_fields_and_properties() -> None:
    batch = _batch(
        4,
        base_offset=42,
        codec=Codec.ZSTD,
        producer_id=7,
        producer_epoch=3,
        base_sequence=10,
        transactional=True,
        partition_leader_epoch=9,
    )
    header = BatchHeader.parse(batch)
    assert header.base_offset == 42
    assert header.size == len(batch)
    assert header.partition_leader_epoch == 9
    assert header.magic == 2
    assert header.codec is Codec.ZSTD
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.is_transactional
    assert not header.is_control
    assert not header.has_delete_horizon
    assert header.has_producer_id
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 10)
    assert header.record_count == 4
    assert header.last_offset_delta == 3
    assert header.last_offset == 45
    assert header.next_offset == 46
    assert header.last_sequence == 13
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1003)
    assert header.crc == compute_crc(batch)
    assert validate_batch(batch) == header
    assert "base_offset=42" in repr(header)


def test_last_sequence_wraps_like_kafka() -> None:
    header = BatchHeader.parse(_batch(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert header.last_sequence == 0
    assert BatchHeader.parse(_batch(1)).last_sequence == -1


def test_pack_into_round_trips() -> None:
    batch = _batch(2)
    header = BatchHeader.parse(batch)
    copy = bytearray(HEADER_SIZE)
    header.pack_into(copy)
    assert copy == batch[:HEADER_SIZE]


def test_iterates_concatenated_batches_as_views() -> None:
    batches = [
        _batch(2, base_offset=0),
        _batch(5, base_offset=2, codec=Codec.GZIP),
        _batch(1, base_offset=7),
    ]
    buf = bytearray(b"".join(batches))
    it = iter_batches(buf, check_crc=True)
    seen = list(it)
    assert [h.base_offset for h, _ in seen] == [0, 2, 7]
    assert [bytes(view) for _, view in seen] == [bytes(b) for b in batches]
    assert all(isinstance(view, memoryview) and view.obj is buf for _, view in seen)
    assert it.consumed == len(buf)
    assert not it.partial
    assert it.remaining == 0


@pytest.mark.parametrize("cut", [1, 11, 12, 16, 17, 60, 61, 62])
def test_trailing_partial_batch_stops_cleanly(cut: int) -> None:
    first, second = _batch(2), _batch(3, base_offset=2)
    buf = bytes(first + second[:cut])
    it = iter_batches(buf)
    assert [h.base_offset for h, _ in it] == [0]
    assert it.partial
    assert it.consumed == len(first)
    assert it.remaining == cut
    assert list(it) == []  # stays stopped

    strict = iter_batches(buf, allow_partial=False)
    next(strict)
    with pytest.raises(ProtocolError) as info:
        next(strict)
    assert info.value.error is ErrorCode.CORRUPT_MESSAGE


def test_empty_buffer_iterates_nothing() -> None:
    it = iter_batches(b"", allow_partial=False)
    assert list(it) == []
    assert it.consumed == 0
    assert not it.partial


def test_iterator_rejects_bad_framing_even_in_partial_mode() -> None:
    batch = _batch(1)
    small = bytearray(batch)
    small[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(ProtocolError):
        list(iter_batches(small))
    negative = bytearray(batch)
    negative[8:12] = (-5).to_bytes(4, "big", signed=True)
    with pytest.raises(ProtocolError):
        list(iter_batches(negative))
    legacy = bytearray(batch)
    legacy[16] = 1
    with pytest.raises(ProtocolError):
        list(iter_batches(legacy))


def test_iterator_crc_check_is_optional() -> None:
    batch = _batch(2)
    batch[-1] ^= 0xFF
    assert len(list(iter_batches(batch))) == 1
    with pytest.raises(ProtocolError, match="CRC"):
        list(iter_batches(batch, check_crc=True))


def test_verify_crc_detects_any_flip_after_crc_field() -> None:
    batch = _batch(2, codec=Codec.LZ4)
    verify_crc(batch)
    for index in range(21, len(batch)):
        broken = bytearray(batch)
        broken[index] ^= 0x01
        with pytest.raises(ProtocolError) as info:
            verify_crc(broken)
        assert info.value.error is ErrorCode.CORRUPT_MESSAGE


def test_patch_offset_and_epoch_keep_crc_valid() -> None:
    buf = bytearray(_batch(3) + _batch(2))
    second = BatchHeader.parse(buf).size
    patch_base_offset(buf, 1000)
    patch_base_offset(buf, 1003, pos=second)
    patch_leader_epoch(buf, 17)
    patch_leader_epoch(memoryview(buf), 18, pos=second)
    headers = [validate_batch(view) for _, view in iter_batches(buf)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(1000, 17), (1003, 18)]
    _, records = decode_batch(memoryview(buf)[second:])
    assert [r.offset for r in records] == [1003, 1004]


def test_patch_through_iterator_view() -> None:
    buf = bytearray(_batch(3) + _batch(2))
    next_offset = 500
    for header, view in iter_batches(buf):
        patch_base_offset(view, next_offset)
        next_offset += header.last_offset_delta + 1
    assert [h.base_offset for h, v in iter_batches(buf, check_crc=True)] == [500, 503]


def test_log_append_time_patch_recomputes_crc() -> None:
    buf = bytearray(_batch(1) + _batch(3, codec=Codec.SNAPPY))
    second = BatchHeader.parse(buf).size
    set_max_timestamp(buf, 999_999, pos=second)
    verify_crc(buf[:second])
    header, records = decode_batch(buf[second:])
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 999_999
    assert header.codec is Codec.SNAPPY
    assert [r.timestamp for r in records] == [999_999] * 3
    set_max_timestamp(buf, 1002, TimestampType.CREATE_TIME, pos=second)
    header, records = decode_batch(buf[second:])
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert [r.timestamp for r in records] == [1000, 1001, 1002]


def test_set_max_timestamp_rejects_truncated_batch() -> None:
    with pytest.raises(ProtocolError):
        set_max_timestamp(bytearray(_batch(2)[:-1]), 5)
    with pytest.raises(ProtocolError):
        set_max_timestamp(bytearray(10), 5)


def test_validate_batch_checks() -> None:
    good = _batch(2)
    with pytest.raises(ProtocolError, match="does not match"):
        validate_batch(good + b"\x00")
    with pytest.raises(ProtocolError, match="codec"):
        validate_batch(raw_batch(b"", attributes=5, count=0))
    with pytest.raises(ProtocolError, match="negative record count"):
        validate_batch(raw_batch(b"", count=-1))
    with pytest.raises(ProtocolError, match="negative last offset"):
        validate_batch(raw_batch(b"", count=0, last_offset_delta=-1))
    with pytest.raises(ProtocolError, match="magic"):
        validate_batch(raw_batch(b"", magic=1))
    with pytest.raises(ProtocolError, match="truncated"):
        BatchHeader.parse(good[:60])
    with pytest.raises(ProtocolError):
        BatchHeader.parse(good, pos=-1)
    assert validate_batch(raw_batch(b"", count=0)).record_count == 0


def test_codec_property_rejects_unknown_ids() -> None:
    header = BatchHeader.parse(raw_batch(b"", attributes=7, count=0))
    with pytest.raises(ProtocolError):
        _ = header.codec


def test_header_equality() -> None:
    a = BatchHeader.parse(_batch(1))
    b = BatchHeader.parse(_batch(1))
    assert a == b
    b.base_offset = 5
    assert a != b
    assert a != object()


def test_validate_with_iterator_header() -> None:
    buf = bytearray(_batch(2) + _batch(3, base_offset=2, codec=Codec.GZIP))
    for header, view in iter_batches(buf):
        assert validate_batch(view, header) is header
        assert decode_batch(view, header)[0] is header
    header, view = next(iter_batches(buf))
    view[-1] ^= 1
    with pytest.raises(ProtocolError, match="CRC"):
        validate_batch(view, header)
    header.magic = 1
    with pytest.raises(ProtocolError, match="magic"):
        validate_batch(view, header, check_crc=False)
