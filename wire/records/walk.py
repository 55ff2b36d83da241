"""Walk every record of a v2 batch without building records: the broker's per-record check.

Kafka's LogValidator iterates every record of every produced batch before the append, so a
batch whose CRC is right but whose records are garbage is refused instead of stored (where it
would stop consumers at that offset). This module does the same walk without building
records; the record layout is in `record`. What is checked, record by record:

- the length varint is at most 5 bytes, not negative, and the record fits in the payload;
- inside the record: the attributes byte, a timestamp-delta varlong (at most 10 bytes), an
  offset-delta varint equal to the record's index (v2 batches carry sequential deltas;
  anything else would give the stored records other offsets than the header promises), key
  and value lengths of -1 (null) or a length that fits, a header count that is not negative,
  each header's key (never null) and value within the record, and nothing left over;
- exactly `recordCount` records, filling the payload to its last byte.

A bad record is INVALID_RECORD, as Kafka's InvalidRecordException. Compressed payloads are
fed in as bounded chunks (`compression.decompress_chunks`), so a payload that inflates to
more than the bound is refused once the bound is passed, having held no more than one chunk
plus the record being read. An uncompressed payload is walked in one piece.

This loop runs for every produced record, so `setup.py` compiles this module with mypyc
(about 20x faster; docs/performance.md): keep it to plain typed Python that mypyc supports,
and rebuild in a checkout (`python setup.py build_ext --inplace`) after editing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.primitives import Buffer
from strom.wire.records.batch import HEADER_SIZE, BatchHeader
from strom.wire.records.compression import DEFAULT_MAX_DECOMPRESSED, Codec, decompress_chunks

if TYPE_CHECKING:
    # mypyc keeps i64 values unboxed (plain C integers, no tagged-int checks), which halves the
    # walk's cost; as Python it is `int`, and annotations are never evaluated at run time.
    from mypy_extensions import i64


class _Incomplete(Exception):
    """The data ended inside a varint."""


def _bad(message: str) -> ProtocolError:
    return ProtocolError(message, ErrorCode.INVALID_RECORD)


def _raw_varint(data: bytes, pos: i64, end: i64, limit: i64) -> tuple[i64, i64]:
    """The unsigned (still zigzagged) value of a varint of at most `limit` bytes (5: int32,
    10: int64, as Kafka's readVarint/readVarlong) before `end`; _Incomplete if cut at `end`."""
    raw: i64 = 0
    shift: i64 = 0
    stop: i64 = min(end, pos + limit)
    i: i64 = pos
    while i < stop:
        byte: i64 = data[i]
        if shift < 63:  # a varlong's 10th byte only says where it ends (callers skip its value)
            raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw & 0xFFFFFFFF if limit == 5 else raw), i + 1
        shift += 7
        i += 1
    if end - pos < limit:
        raise _Incomplete
    raise _bad(f"varint longer than {limit} bytes")


def _varint(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    """A zigzag int32 varint."""
    raw, pos = _raw_varint(data, pos, end, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def _walk(data: bytes, pos: i64, end: i64, index: i64, count: i64, final: bool) -> tuple[i64, i64]:
    """Check whole records from `pos` (the `index`-th of `count`); return (pos, index) after
    the last whole one. With `final` the data ends here, so a cut record is an error.

    The produce path's hot loop: one- and two-byte varints (every field of typical records)
    are decoded inline; the zigzag value stays `raw` where only its sign or size matters.
    """
    slow = _raw_varint
    raw: i64 = 0
    byte: i64 = 0
    start: i64 = 0
    length: i64 = 0
    record_end: i64 = 0
    while index < count:
        start = pos
        if pos >= end:
            if final:
                raise _bad(f"batch declares {count} records but holds {index}")
            break
        byte = data[pos]
        if byte < 0x80:
            raw = byte
            pos += 1
        elif pos + 1 < end and data[pos + 1] < 0x80:
            raw = (byte & 0x7F) | data[pos + 1] << 7
            pos += 2
        else:
            try:
                raw, pos = slow(data, pos, end, 5)
            except _Incomplete:
                if final:
                    raise _bad(f"record {index} length is cut off") from None
                return start, index
        if raw & 1 or raw == 0:
            raise _bad(f"record {index} has length {(raw >> 1) ^ -(raw & 1)}")
        length = raw >> 1
        record_end = pos + length
        if record_end > end:
            if final:
                raise _bad(f"record {index} of {length} bytes runs past the batch end")
            return start, index
        try:
            # attributes (unused by v2), then the timestamp delta (varlong: any value)
            if data[pos + 1] < 0x80:
                pos += 2
            elif data[pos + 2] < 0x80:
                pos += 3
            else:
                _, pos = slow(data, pos + 1, record_end, 10)
            # offset delta: the record's index
            byte = data[pos]
            if byte < 0x80:
                raw = byte
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (byte & 0x7F) | data[pos + 1] << 7
                pos += 2
            else:
                raw, pos = slow(data, pos, record_end, 5)
            if raw != index << 1:
                raise _bad(f"record {index} has offset delta {(raw >> 1) ^ -(raw & 1)}")
            # key, then value: a length, or -1 (raw 1) for null
            byte = data[pos]
            if byte < 0x80:
                raw = byte
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (byte & 0x7F) | data[pos + 1] << 7
                pos += 2
            else:
                raw, pos = slow(data, pos, record_end, 5)
            if not raw & 1:
                pos += raw >> 1
            elif raw != 1:
                raise _bad(f"record {index} has a key length of {(raw >> 1) ^ -1}")
            byte = data[pos]
            if byte < 0x80:
                raw = byte
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (byte & 0x7F) | data[pos + 1] << 7
                pos += 2
            else:
                raw, pos = slow(data, pos, record_end, 5)
            if not raw & 1:
                pos += raw >> 1
            elif raw != 1:
                raise _bad(f"record {index} has a value length of {(raw >> 1) ^ -1}")
            # headers: usually none
            if data[pos] == 0:
                pos += 1
            else:
                pos = _headers(data, pos, record_end, index)
        except (IndexError, _Incomplete):
            raise _bad(f"record {index} is cut off inside its fields") from None
        if pos != record_end:
            raise _bad(f"record {index} fields do not fill its {length} bytes")
        index += 1
    if final and pos != end:
        raise _bad(f"{end - pos} bytes follow the batch's {count} records")
    return pos, index


def _headers(data: bytes, pos: i64, record_end: i64, index: i64) -> i64:
    """Check a record's header count and headers; the position after them."""
    headers, pos = _varint(data, pos, record_end)
    if headers < 0:
        raise _bad(f"record {index} has {headers} headers")
    for _ in range(headers):
        size, pos = _varint(data, pos, record_end)
        if size < 0:
            raise _bad(f"record {index} has a null header key")
        pos += size
        size, pos = _varint(data, pos, record_end)
        if size >= 0:
            pos += size
        elif size != -1:
            raise _bad(f"record {index} has a header value length of {size}")
    return pos


def check_records(
    batch: Buffer, header: BatchHeader, max_bytes: int = DEFAULT_MAX_DECOMPRESSED
) -> None:
    """Walk every record of one whole, CRC-checked batch (see the module docstring).

    Raises ProtocolError: INVALID_RECORD for bad records, CORRUPT_MESSAGE for a payload that
    does not decompress, MESSAGE_TOO_LARGE past `max_bytes` of decompressed records.
    """
    count = header.record_count
    codec = header.codec
    if codec is Codec.NONE:
        data = bytes(memoryview(batch)[HEADER_SIZE : header.size])
        _walk(data, 0, len(data), 0, count, True)
        return
    pending = b""
    index = 0
    for chunk in decompress_chunks(codec, memoryview(batch)[HEADER_SIZE : header.size], max_bytes):
        pending = pending + chunk if pending else bytes(chunk)
        pos, index = _walk(pending, 0, len(pending), index, count, False)
        pending = pending[pos:]
    _walk(pending, 0, len(pending), index, count, True)
