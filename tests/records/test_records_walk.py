"""The produce path's record walk: every poison batch is refused, every valid one passes.

Each case runs against the module as imported (mypyc-compiled when built) and against its
Python source, so both stay correct. Poison batches carry a correct CRC: the walk, not the
CRC, has to catch them.
"""

from __future__ import annotations

import importlib.util
import os
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import (
    DEFAULT_MAX_DECOMPRESSED,
    BatchHeader,
    Codec,
    Record,
    build_batch,
    compress,
    decode_batch,
    encode_record,
    walk,
)

from .records_strategies import FUZZ, codecs, fix_crc, raw_batch, record_lists

MIB = 1 << 20


def _python_walk() -> ModuleType:
    source = Path(walk.__file__).with_name("walk.py")
    spec = importlib.util.spec_from_file_location("strom_walk_as_python", source)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


IMPLEMENTATIONS = {"imported": walk, "python": _python_walk()}
Check = Callable[[bytes | bytearray, BatchHeader], None]


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def check(request: pytest.FixtureRequest) -> Check:
    module = IMPLEMENTATIONS[request.param]

    def run(batch: bytes | bytearray, header: BatchHeader) -> None:
        module.check_records(batch, header)

    return run


def refused(check: Check, batch: bytes | bytearray, code: ErrorCode) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        check(batch, BatchHeader.parse(batch))
    assert info.value.error is code, info.value
    return info.value


def record(index: int, value: bytes | None = b"v", key: bytes | None = None) -> bytearray:
    out = bytearray()
    encode_record(out, index, 0, key, value)
    return out


@pytest.mark.parametrize(
    ("payload", "count", "match"),
    [
        (b"", 1, "holds 0"),  # no record at all
        (b"\x7f", 1, "length -64"),
        (b"\x40", 1, "runs past"),  # length 32 > what is left
        (b"\xff\xff\xff\xff\xff\x01", 1, "longer than 5"),  # 6-byte length varint
        (b"\x00", 1, "length 0"),
        (b"\x02\x00", 1, "cut off"),  # stops after attributes
        (b"\x2e\x00" + b"\xff" * 22, 1, "longer than 10"),  # 11-byte timestamp varlong
        (b"\x0c\x00\x00\x00\x03\x01\x00", 1, "key length of -2"),
        (b"\x0c\x00\x00\x00\x40\x01\x00", 1, "cut off"),  # key of 32 bytes past the record
        (b"\x0c\x00\x00\x00\x01\x01\x01", 1, "-1 headers"),
        (b"\x10\x00\x00\x00\x01\x01\x02\x01\x00", 1, "null header key"),
        (b"\x10\x00\x00\x00\x01\x01\x00\x00\x00", 1, "do not fill"),  # 2 bytes extra
        (b"\x0c\x00\x00\x00\x01\x01\x00", 2, "holds 1"),  # fewer records than declared
        (b"\x0c\x00\x00\x00\x01\x01\x00\x00", 1, "bytes follow"),  # a trailing byte
        (b"\x0c\x00\x00\x02\x01\x01\x00", 1, "offset delta 1"),  # first record's delta is 1
        (bytes(record(0) + record(0)), 2, "offset delta 0"),  # deltas 0, 0
        (bytes(record(0) + record(2)), 2, "offset delta 2"),  # a gap
        (b"\x0a\x00\x00\x00\x01\x07\x00", 1, "value length of -4"),
    ],
)
def test_poison_records_are_invalid_record(
    check: Check, payload: bytes, count: int, match: str
) -> None:
    error = refused(check, raw_batch(payload, count=count), ErrorCode.INVALID_RECORD)
    assert match in str(error)


def test_varints_of_up_to_five_bytes_are_accepted(check: Check) -> None:
    body = b"\x00\x00\x00\x01\x02v\x00"  # attributes, ts 0, delta 0, key null, value "v", 0 hdrs
    padded_length = bytes([len(body) << 1 | 0x80, 0x80, 0x80, 0x80, 0x00])  # Kafka reads these
    batch = raw_batch(padded_length + body)
    check(batch, BatchHeader.parse(batch))


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
def test_garbage_records_inside_a_good_stream_are_invalid_record(
    check: Check, codec: Codec
) -> None:
    payload = compress(codec, b"\x0c\x00\x00\x00\x03\x01\x00")
    refused(check, raw_batch(payload, attributes=codec), ErrorCode.INVALID_RECORD)


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
@pytest.mark.parametrize("damage", ["garbage", "truncated", "trailing"])
def test_payloads_that_do_not_decompress_are_corrupt_message(
    check: Check, codec: Codec, damage: str
) -> None:
    good = compress(codec, bytes(record(0) + record(1)))
    payload = {
        "garbage": b"\x05" + bytes(range(200, 255)),  # no codec's magic; snappy: 5 bytes
        "truncated": good[: len(good) - 3],
        "trailing": good + b"\x00junk",
    }[damage]
    refused(check, raw_batch(payload, count=2, attributes=codec), ErrorCode.CORRUPT_MESSAGE)


def _streamed(codec: Codec, pieces: Iterator[bytes]) -> bytes:
    """Compress without holding the input: how a bomb is made cheaply."""
    if codec is Codec.ZSTD:
        zstd = zstandard.ZstdCompressor().compressobj()
        return b"".join(zstd.compress(p) for p in pieces) + zstd.flush()
    if codec is Codec.GZIP:
        deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(deflate.compress(p) for p in pieces) + deflate.flush()
    lz4_out = lz4.frame.LZ4FrameCompressor()
    frame: bytes = lz4_out.begin() + b"".join(lz4_out.compress(p) for p in pieces)
    end: bytes = lz4_out.flush()
    return frame + end


def _valid_records_of_zeros(count: int) -> Iterator[bytes]:
    for index in range(count):
        yield bytes(record(index, value=bytes(MIB - 16)))


@pytest.mark.parametrize("codec", [Codec.ZSTD, Codec.GZIP, Codec.LZ4])
def test_a_bomb_is_refused_without_holding_its_output(check: Check, codec: Codec) -> None:
    """80 MiB of well-formed records in a few KiB: past the 64 MiB bound while streaming,
    having held a chunk and a record, not the output."""
    count = 80
    batch = raw_batch(
        _streamed(codec, _valid_records_of_zeros(count)),
        count=count,
        last_offset_delta=count - 1,
        attributes=codec,
    )
    assert len(batch) < MIB  # under max.message.bytes
    tracemalloc.start()
    try:
        error = refused(check, batch, ErrorCode.MESSAGE_TOO_LARGE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(DEFAULT_MAX_DECOMPRESSED) in str(error)
    assert peak < 8 * MIB


def test_a_bomb_of_zeros_stops_at_the_first_chunk(check: Check) -> None:
    zeros = _streamed(Codec.GZIP, (bytes(MIB) for _ in range(80)))
    batch = raw_batch(zeros, attributes=Codec.GZIP)
    tracemalloc.start()
    try:
        refused(check, batch, ErrorCode.INVALID_RECORD)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
def test_records_split_across_chunks_are_walked_whole(check: Check, codec: Codec) -> None:
    """Records straddling the 256 KiB chunk boundaries, some cut inside their length."""
    values = [os.urandom(n) for n in (100, 300_000, 5, 262_000, 70_000, 1, 200_000)]
    records = [Record(b"k", v, (("h", b"x"),), 0) for v in values]
    batch = build_batch(records, codec=codec)
    check(batch, BatchHeader.parse(batch))


@FUZZ
@given(records=record_lists(max_size=8), codec=codecs)
def test_every_built_batch_passes(records: list[Record], codec: Codec) -> None:
    batch = build_batch([r._replace(offset=-1) for r in records], codec=codec)
    for module in IMPLEMENTATIONS.values():
        module.check_records(batch, BatchHeader.parse(batch))


@FUZZ
@given(
    records=record_lists(max_size=5),
    index=st.integers(0, 400),
    value=st.integers(0, 255),
)
def test_what_passes_decodes_with_sequential_offsets(
    records: list[Record], index: int, value: int
) -> None:
    """The walk never accepts records the full decoder refuses; both implementations agree.
    (The header is `validate_batch`'s job, checked before the walk: only records change.)"""
    data = bytearray(build_batch([r._replace(offset=-1) for r in records]))
    data[61 + index % (len(data) - 61)] = value
    fix_crc(data)
    header = BatchHeader.parse(data)
    outcomes: set[ErrorCode | None] = set()
    for module in IMPLEMENTATIONS.values():
        try:
            module.check_records(data, header)
            outcomes.add(None)
        except ProtocolError as exc:
            outcomes.add(exc.error)
    assert len(outcomes) == 1
    if outcomes == {None}:
        _, decoded = decode_batch(data)
        assert [r.offset - header.base_offset for r in decoded] == list(range(len(decoded)))
        assert len(decoded) == header.record_count


def test_a_compiled_walk_is_built_from_the_current_source() -> None:
    """`python setup.py build_ext --inplace` must be re-run after editing walk.py."""
    compiled = Path(walk.__file__)
    if os.environ.get("STROM_COMPILE") == "0":
        assert compiled.suffix == ".py"
        return
    assert compiled.suffix != ".py", (
        "the record walk runs as Python (3x the produce CPU): install with a C compiler "
        "(`pip install -e .` builds it) or set STROM_COMPILE=0 to accept the slow path"
    )
    built = max(so.stat().st_mtime for so in compiled.parent.glob("walk*.so"))
    assert built >= compiled.with_name("walk.py").stat().st_mtime, (
        "walk.py changed after it was compiled: run `python setup.py build_ext --inplace`"
    )
