"""Malformed input of every kind raises exactly ProtocolError, never anything else."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import (
    HEADER,
    BatchHeader,
    Codec,
    Record,
    batch_payload,
    build_batch,
    decode_batch,
    decode_legacy_message,
    decode_records,
    decompress,
    iter_batches,
    parse_control_key,
    parse_end_txn_marker,
    read_records,
    set_max_timestamp,
    validate_batch,
    verify_crc,
)
from strom.wire.records.compression import codec_from_id

from .records_strategies import FUZZ, codecs, fix_crc, legacy_sets, raw_batch, record_lists

SMALL = 1 << 20  # keep fuzzed decompression cheap


def _corrupt(fn: Callable[[], object]) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        fn()
    return info.value


@pytest.mark.parametrize(
    ("payload", "count", "match"),
    [
        (b"", 1, "truncated"),  # no record at all
        (b"\x7f", 1, "past the batch end"),  # length -64
        (b"\x40", 1, "past the batch end"),  # length 32 > remaining
        (b"\xff\xff\xff\xff\xff\x01", 1, "longer than 5"),  # 6-byte varint
        (b"\x00", 1, "attributes"),  # zero-length record
        (b"\x02\x00", 1, "varlong"),  # stops after attributes
        (b"\x2e\x00" + b"\xff" * 22, 1, "longer than 10"),  # 11-byte varlong
        (b"\x0c\x00\x00\x00\x03\x01\x00", 1, "negative record key length"),  # key length -2
        (b"\x0c\x00\x00\x00\x40\x01\x00", 1, "record key"),  # key length 32 past record
        (b"\x0c\x00\x00\x00\x01\x01\x01", 1, "header count"),  # header count -1
        (b"\x10\x00\x00\x00\x01\x01\x02\x01\x00", 1, "null header key"),
        (b"\x10\x00\x00\x00\x01\x01\x00\x00\x00", 1, "past its fields"),  # 2 bytes extra
        (b"\x0c\x00\x00\x00\x01\x01\x00", 2, "truncated"),  # fewer records than declared
        (b"\x0c\x00\x00\x00\x01\x01\x00\x00", 1, "remain after"),  # trailing byte
    ],
)
def test_malformed_records(payload: bytes, count: int, match: str) -> None:
    batch = raw_batch(payload, count=count)
    error = _corrupt(lambda: decode_batch(batch))
    assert error.error is ErrorCode.CORRUPT_MESSAGE
    assert match in str(error)


def test_one_record_minimal_is_valid() -> None:
    (record,) = decode_batch(raw_batch(b"\x0c\x00\x00\x00\x01\x01\x00"))[1]
    assert record == Record(None, None, (), 0, 0)


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
def test_corrupt_compressed_payload_with_valid_crc(codec: Codec) -> None:
    """A flipped payload byte is CORRUPT_MESSAGE, or (no codec checksum caught it) one whole record.

    Never fewer records than the header declares and never silence: most flips must
    be refused, so a decoder that swallowed payload errors fails here.
    """
    batch = bytearray(build_batch([Record(b"k", b"v" * 500)] * 1, codec=codec))
    refused: list[ErrorCode] = []
    decoded = 0
    for index in range(61, len(batch), 3):
        broken = bytearray(batch)
        broken[index] ^= 0x55
        fix_crc(broken)
        try:
            header, records = decode_batch(broken)
        except ProtocolError as exc:
            refused.append(exc.error)
            continue
        decoded += 1
        assert len(records) == header.record_count == 1, (index, records)
        assert records[0].value is not None
        assert len(records[0].value) == 500, index
    assert set(refused) <= {ErrorCode.CORRUPT_MESSAGE}
    assert len(refused) >= (len(refused) + decoded) // 2, (codec, refused, decoded)


def test_batch_level_defects() -> None:
    good = build_batch([Record(b"k", b"v")])
    for cut in (0, 5, 12, 60, len(good) - 1):
        _corrupt(lambda cut=cut: decode_batch(good[:cut]))  # type: ignore[misc]
    flipped = bytearray(good)
    flipped[-2] ^= 1  # the value byte, just before the header count
    assert "CRC" in str(_corrupt(lambda: decode_batch(flipped)))
    assert decode_batch(flipped, check_crc=False)[1][0].value == b"w"
    for codec_id in (5, 6, 7):
        _corrupt(lambda codec_id=codec_id: decode_batch(raw_batch(b"", attributes=codec_id)))  # type: ignore[misc]
    _corrupt(lambda: decode_batch(raw_batch(b"", length=10)))
    _corrupt(lambda: list(iter_batches(raw_batch(b"", length=-1))))


def test_decompression_bound_surfaces_from_decode_batch() -> None:
    batch = build_batch([Record(None, bytes(2 << 20))], codec=Codec.ZSTD)
    error = _corrupt(lambda: decode_batch(batch, max_bytes=1 << 20))
    assert error.error is ErrorCode.MESSAGE_TOO_LARGE


# --- fuzzing --------------------------------------------------------------------------------


def _run_every_decoder(data: bytes) -> None:
    """Feed `data` to every public decoder; anything but ProtocolError fails the test."""
    attempts: list[Callable[[], object]] = [
        lambda: list(iter_batches(data)),
        lambda: list(iter_batches(data, allow_partial=False, check_crc=True)),
        lambda: [
            decode_batch(view, check_crc=False, max_bytes=SMALL) for _, view in iter_batches(data)
        ],
        lambda: validate_batch(data),
        lambda: decode_batch(data, max_bytes=SMALL),
        lambda: decode_batch(data, check_crc=False, max_bytes=SMALL),
        lambda: BatchHeader.parse(data),
        lambda: verify_crc(data),
        lambda: read_records(data, check_crc=False, include_control=True, max_bytes=SMALL),
        lambda: read_records(data, allow_partial=False, max_bytes=SMALL),
        lambda: decode_legacy_message(data, max_bytes=SMALL),
        lambda: decode_legacy_message(data, check_crc=False, max_bytes=SMALL),
        lambda: parse_control_key(data),
        lambda: parse_end_txn_marker(Record(data[:4], data[4:])),
        lambda: set_max_timestamp(bytearray(data), 1),
        lambda: codec_from_id(data[0] if data else 9),
    ]
    for codec in Codec:
        attempts.append(lambda codec=codec: decompress(codec, data, SMALL))  # type: ignore[misc]
        attempts.append(lambda codec=codec: decompress(codec, data, SMALL, legacy_lz4=True))  # type: ignore[misc]
    if len(data) >= 61:
        header = BatchHeader.parse(build_batch([Record(None, None)]))
        header.record_count = data[0] % 8
        attempts.append(lambda: decode_records(header, data))
        unchecked = BatchHeader(*HEADER.unpack_from(data))
        attempts.append(lambda: batch_payload(data, unchecked, SMALL))
    codes = []
    for attempt in attempts:
        try:
            attempt()
        except ProtocolError as exc:
            codes.append(exc.error)
    assert all(isinstance(code, ErrorCode) for code in codes)


@FUZZ
@given(data=st.binary(max_size=400))
def test_fuzz_random_bytes(data: bytes) -> None:
    _run_every_decoder(data)


@st.composite
def mutated_batches(draw: st.DrawFn) -> bytes:
    """A valid v2 batch or legacy set, then flipped, cut, spliced; v2 CRCs sometimes re-fixed."""
    if draw(st.booleans()):
        data = bytearray(draw(legacy_sets()))
    else:
        records = draw(record_lists(max_size=5))
        codec = draw(codecs)
        data = bytearray(build_batch(records, codec=codec, transactional=draw(st.booleans())))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        index = draw(st.integers(0, max(0, len(data) - 1)))
        if action == "flip" and data:
            data[index] ^= 1 << draw(st.integers(0, 7))
        elif action == "set" and data:
            data[index] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[index:]
        elif action == "insert":
            data[index:index] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del data[index : index + draw(st.integers(1, 8))]
    if draw(st.booleans()):
        fix_crc(data)
    return bytes(data)


@FUZZ
@given(data=mutated_batches())
def test_fuzz_mutated_batches(data: bytes) -> None:
    _run_every_decoder(data)


@FUZZ
@given(
    records=record_lists(max_size=5),
    codec=codecs,
    index=st.integers(61, 10_000),
    value=st.integers(0, 255),
)
def test_fuzz_compressed_payload_bytes(
    records: list[Record], codec: Codec, index: int, value: int
) -> None:
    data = bytearray(build_batch(records, codec=codec))
    data[index % len(data) if len(data) > 61 else 60] = value
    fix_crc(data)
    _run_every_decoder(bytes(data))
