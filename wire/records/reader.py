"""Decode a whole record set (fetch data, a log segment) that may mix magic 0, 1 and 2.

All three formats share the framing `offset int64, size int32` and put the
magic byte at offset 16, so one loop can dispatch per entry. This is the slow,
record-level path; the broker's produce path wants `iter_batches` instead.
"""

from __future__ import annotations

from typing import NamedTuple

from strom.wire.errors import ProtocolError, truncated
from strom.wire.primitives import INT32, Buffer
from strom.wire.records.batch import LOG_OVERHEAD, MAGIC_OFFSET, MIN_BATCH_LENGTH
from strom.wire.records.builder import decode_batch
from strom.wire.records.compression import DEFAULT_MAX_DECOMPRESSED
from strom.wire.records.legacy import MIN_SIZE_V0, MIN_SIZE_V1, decode_legacy_message
from strom.wire.records.record import Record

_MIN_SIZE = (MIN_SIZE_V0, MIN_SIZE_V1, MIN_BATCH_LENGTH)


class RecordSet(NamedTuple):
    """What `read_records` found: records, bytes of whole entries, partial tail seen."""

    records: list[Record]
    consumed: int
    partial: bool


def read_records(
    buf: Buffer,
    *,
    check_crc: bool = True,
    allow_partial: bool = True,
    include_control: bool = False,
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> RecordSet:
    """Decode every record in `buf`, in order, across v0/v1 messages and v2 batches.

    Control batches (transaction markers) are skipped unless `include_control`.
    A trailing partial entry stops decoding (`partial=True`) or, without
    `allow_partial`, raises CORRUPT_MESSAGE. `max_bytes` bounds each entry.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    records: list[Record] = []
    while pos < end:
        remaining = end - pos
        if remaining <= MAGIC_OFFSET:
            return _partial(records, pos, allow_partial)
        (size,) = INT32.unpack_from(view, pos + 8)
        magic = view[pos + MAGIC_OFFSET]
        if magic > 2:
            raise ProtocolError(f"unknown record format magic {magic}")
        if size < _MIN_SIZE[magic]:
            raise ProtocolError(f"magic {magic} entry size {size} is too small")
        if size > remaining - LOG_OVERHEAD:
            return _partial(records, pos, allow_partial)
        entry = view[pos : pos + LOG_OVERHEAD + size]
        if magic == 2:
            header, batch_records = decode_batch(entry, check_crc=check_crc, max_bytes=max_bytes)
            if include_control or not header.is_control:
                records.extend(batch_records)
        else:
            records.extend(decode_legacy_message(entry, check_crc=check_crc, max_bytes=max_bytes))
        pos += LOG_OVERHEAD + size
    return RecordSet(records, pos, False)


def _partial(records: list[Record], pos: int, allow_partial: bool) -> RecordSet:
    if not allow_partial:
        raise truncated("record set entry")
    return RecordSet(records, pos, True)
