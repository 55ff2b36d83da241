"""Legacy message sets (magic 0/1): kafka-python's builder, hand-built wrappers, defects."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import Codec, Record, build_batch, decode_legacy_message, read_records

from .records_kafka_python import LegacyRecordBatchBuilder, MemoryRecordsBuilder, kafka_codec
from .records_strategies import SETTINGS, legacy_message, legacy_sets

LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


def _kafka_python_set(magic: int, codec: Codec, n: int = 20) -> tuple[bytes, list[Record]]:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    expected = []
    for i in range(n):
        key = None if i % 4 == 0 else b"k%d" % i
        value = None if i % 6 == 0 else b"legacy value %d" % i * 5
        timestamp = 1_600_000_000_000 + i
        builder.append(i, timestamp=timestamp, key=key, value=value)
        expected.append(Record(key, value, (), timestamp if magic == 1 else -1, i))
    return bytes(builder.build()), expected


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafka_python_legacy_sets_decode(magic: int, codec: Codec) -> None:
    data, expected = _kafka_python_set(magic, codec)
    result = read_records(data, allow_partial=False)
    assert result.records == expected
    assert result.consumed == len(data)
    assert not result.partial


@pytest.mark.parametrize("magic", [0, 1])
def test_memory_records_builder_legacy(magic: int) -> None:
    builder = MemoryRecordsBuilder(magic=magic, compression_type=1, batch_size=1 << 20)
    for i in range(10):
        builder.append(timestamp=10 + i, key=None, value=b"v%d" % i)
    builder.close()
    records = read_records(bytes(builder.buffer())).records
    assert [r.value for r in records] == [b"v%d" % i for i in range(10)]
    assert [r.offset for r in records] == list(range(10))


def _wrapper(
    inner: bytes, offset: int, codec: Codec, magic: int = 1, attributes: int = 0, timestamp: int = 5
) -> bytes:
    if codec is Codec.SNAPPY:
        packed = kafka_codec.snappy_encode(inner)
    elif codec is Codec.LZ4:
        packed = (
            kafka_codec.lz4_encode_old_kafka(inner) if magic == 0 else kafka_codec.lz4_encode(inner)
        )
    else:
        packed = kafka_codec.gzip_encode(inner)
    return legacy_message(
        offset, None, packed, magic=magic, attributes=attributes | codec, timestamp=timestamp
    )


def test_magic1_relative_offsets_use_wrapper_offset() -> None:
    inner = b"".join(legacy_message(i, None, b"m%d" % i, timestamp=100 + i) for i in range(3))
    records = decode_legacy_message(_wrapper(inner, 1002, Codec.GZIP))
    assert [r.offset for r in records] == [1000, 1001, 1002]
    assert [r.timestamp for r in records] == [100, 101, 102]


def test_magic1_log_append_time_wrapper_sets_inner_timestamps() -> None:
    inner = b"".join(legacy_message(i, None, b"m", timestamp=1) for i in range(2))
    records = decode_legacy_message(
        _wrapper(inner, 11, Codec.SNAPPY, attributes=0x08, timestamp=999)
    )
    assert [(r.offset, r.timestamp) for r in records] == [(10, 999), (11, 999)]


def test_magic0_inner_offsets_are_absolute() -> None:
    inner = b"".join(legacy_message(50 + i, b"k", b"v", magic=0) for i in range(3))
    records = decode_legacy_message(_wrapper(inner, 52, Codec.LZ4, magic=0))
    assert [(r.offset, r.timestamp) for r in records] == [(50, -1), (51, -1), (52, -1)]


def test_wrapper_offset_below_last_inner_is_corrupt() -> None:
    inner = b"".join(legacy_message(i, None, b"m") for i in range(5))
    with pytest.raises(ProtocolError, match="wrapper offset"):
        decode_legacy_message(_wrapper(inner, 3, Codec.GZIP))


@pytest.mark.parametrize(
    ("inner", "message"),
    [
        (legacy_message(0, None, b"x", magic=0), "magic"),
        (legacy_message(0, None, b"x", attributes=1), "compressed twice"),
        (b"", "no inner"),
        (legacy_message(0, None, b"x")[:-1], "size"),
        (legacy_message(0, None, b"x") + b"\x00" * 5, "truncated"),
    ],
)
def test_bad_inner_sets(inner: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_legacy_message(_wrapper(inner, 0, Codec.GZIP))


def test_mixed_legacy_and_v2_record_set() -> None:
    v0 = legacy_message(0, b"a", b"1", magic=0)
    v1 = legacy_message(1, b"b", b"2", timestamp=7)
    v2 = build_batch([Record(b"c", b"3", (), 8)], base_offset=2)
    result = read_records(v0 + v1 + v2 + v1[:20])
    assert [(r.key, r.offset) for r in result.records] == [(b"a", 0), (b"b", 1), (b"c", 2)]
    assert result.partial
    assert result.consumed == len(v0) + len(v1) + len(v2)
    with pytest.raises(ProtocolError):
        read_records(v0 + v1[:20], allow_partial=False)


def test_legacy_defects() -> None:
    good = legacy_message(0, b"k", b"v")
    flipped = bytearray(good)
    flipped[-1] ^= 1
    with pytest.raises(ProtocolError, match="CRC"):
        decode_legacy_message(bytes(flipped))
    assert decode_legacy_message(bytes(flipped), check_crc=False)[0].value == b"w"
    cases = [
        good[:20],
        legacy_message(0, b"k", b"v", magic=2),
        legacy_message(0, b"k", b"v", attributes=4),  # zstd needs magic 2
        legacy_message(0, b"k", b"v", attributes=7),
        legacy_message(0, b"k", None, attributes=1),  # compressed but null value
        legacy_message(0, b"k", b"not gzip", attributes=1),
    ]
    for case in cases:
        with pytest.raises(ProtocolError) as info:
            decode_legacy_message(case)
        assert info.value.error is ErrorCode.CORRUPT_MESSAGE


def test_legacy_length_defects() -> None:
    base = bytearray(legacy_message(0, b"key", b"value"))
    key_len_at = 12 + 4 + 2 + 8
    for bad_len in (-2, 1000):
        broken = bytearray(base)
        struct.pack_into(">i", broken, key_len_at, bad_len)
        with pytest.raises(ProtocolError):
            decode_legacy_message(bytes(broken), check_crc=False)
    trailing = bytearray(base) + b"\x00"
    struct.pack_into(">i", trailing, 8, len(trailing) - 12)
    with pytest.raises(ProtocolError, match="past its value"):
        decode_legacy_message(bytes(trailing), check_crc=False)
    with pytest.raises(ProtocolError, match="does not match"):
        decode_legacy_message(bytes(base) + b"\x00")


@SETTINGS
@given(data=legacy_sets())
def test_generated_legacy_sets_decode(data: bytes) -> None:
    result = read_records(data, allow_partial=False)
    assert result.consumed == len(data)
    assert result.records
    assert [r.offset for r in result.records] == list(range(len(result.records)))
