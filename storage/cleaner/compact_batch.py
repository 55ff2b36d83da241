"""One stored batch through the cleaner: which records survive, and the bytes to write back.

Records are scanned, not decoded into objects: the scan notes each record's
offset, key, whether it is a tombstone (null value) and where its bytes lie,
so a batch that loses records is rebuilt by copying the survivors' bytes.

A record survives when it has a key, no later offset for that key was mapped,
and it is not a tombstone whose batch's delete horizon has passed (KIP-534).
The rewritten batch keeps everything Kafka keeps: base offset, lastOffsetDelta
(so the producer's last sequence still holds), producer id/epoch/base sequence,
leader epoch, attributes and codec (the survivors are recompressed with it).
maxTimestamp is recomputed from the survivors (CreateTime) or kept
(LogAppendTime). A batch that keeps tombstones and has no delete horizon gets
one, now + delete.retention.ms, stored as Kafka does: attribute bit 6 set and
baseTimestamp holding the horizon, the records' timestamp deltas re-based on it.
A batch left with no records is dropped, unless it is its producer's newest
batch: then an empty batch (recordCount 0, uncompressed) keeps its sequence
numbers, as Kafka's cleaner does. Control batches and aborted transactions'
batches follow the transaction rules instead (strom.storage.cleaner.cleaned_txns,
applied by the pass); `rebuild` and `empty_batch` serve them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from strom.storage.cleaner.offset_map import OffsetMap
from strom.storage.log_errors import CorruptLogError
from strom.wire.errors import ProtocolError
from strom.wire.primitives import varint, varlong
from strom.wire.records import (
    CODEC_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    BatchHeader,
    Codec,
    TimestampType,
    batch_payload,
    compress,
    write_crc,
)

# Fields of a scanned record (plain tuples: the scan runs once per record, so no NamedTuple).
OFFSET: Final = 0
KEY: Final = 1
TOMBSTONE: Final = 2
START: Final = 3
BODY: Final = 4
AFTER_TS: Final = 5
END: Final = 6
TS_DELTA: Final = 7
Scanned = tuple[int, bytes | None, bool, int, int, int, int, int]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint/varlong at `pos`; IndexError when truncated."""
    byte = data[pos]
    pos += 1
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos
    raw = byte & 0x7F
    shift = 7
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def scan_records(header: BatchHeader, payload: bytes) -> list[Scanned]:
    """(offset, key, tombstone, start, body, after_ts, end, ts_delta) per record: `start` is
    the record's length varint, `body` its attributes byte, `after_ts` just past its
    timestamp delta, `end` its end."""
    out: list[Scanned] = []
    base = header.base_offset
    pos = 0
    size = len(payload)
    varint = _varint
    try:
        for _ in range(header.record_count):
            byte = payload[pos]  # one-byte varints (short records) skip the call
            length, body = (
                ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else varint(payload, pos)
            )
            end = body + length
            ts_delta, after_ts = varint(payload, body + 1)
            byte = payload[after_ts]
            delta, p = (
                ((byte >> 1) ^ -(byte & 1), after_ts + 1)
                if byte < 0x80
                else varint(payload, after_ts)
            )
            byte = payload[p]
            key_len, p = ((byte >> 1) ^ -(byte & 1), p + 1) if byte < 0x80 else varint(payload, p)
            if key_len < 0:
                key = None
            else:
                key = payload[p : p + key_len]
                p += key_len
            tombstone = payload[p] == 1  # the zigzag varint of -1: a null value
            if end > size or p >= end:
                raise ValueError("record past the end of the batch")
            out.append((base + delta, key, tombstone, pos, body, after_ts, end, ts_delta))
            pos = end
    except (IndexError, ValueError) as exc:
        raise CorruptLogError(f"unreadable record in batch at offset {base}: {exc}") from exc
    return out


def batch_records(batch: memoryview, header: BatchHeader) -> tuple[bytes, list[Scanned]]:
    """The (decompressed) payload and its scanned records."""
    if header.attributes & CODEC_MASK:
        try:
            payload = bytes(batch_payload(batch, header))
        except ProtocolError as exc:
            raise CorruptLogError(f"batch at offset {header.base_offset}: {exc}") from exc
    else:
        payload = bytes(batch[HEADER_SIZE:])
    return payload, scan_records(header, payload)


@dataclass
class Filtered:
    """What to write for one batch: the original (`data is batch`), new bytes, or nothing."""

    data: bytes | bytearray | memoryview | None
    changed: bool
    horizon: int | None
    """The delete horizon of tombstones this batch still holds (when it next needs cleaning)."""
    records_kept: int


def filter_batch(
    batch: memoryview,
    header: BatchHeader,
    offsets: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    producer_last: bool,
) -> Filtered:
    """Apply the survival rule (module docstring) to one batch."""
    if header.is_control:
        return Filtered(batch, False, None, header.record_count)
    payload, scanned = batch_records(batch, header)
    has_horizon = header.has_delete_horizon
    expired = has_horizon and now_ms >= header.base_timestamp
    latest = offsets.latest
    kept: list[Scanned] = []
    tombstones = False
    for record in scanned:
        key = record[KEY]
        if key is None or record[OFFSET] < latest(key):
            continue
        if record[TOMBSTONE]:
            if expired:
                continue
            tombstones = True
        kept.append(record)
    new_horizon = now_ms + delete_retention_ms if tombstones and not has_horizon else None
    horizon = (
        new_horizon if new_horizon is not None else (header.base_timestamp if tombstones else None)
    )
    if len(kept) == len(scanned) and new_horizon is None:
        return Filtered(batch, False, horizon, len(kept))
    if not kept:
        return Filtered(empty_batch(header) if producer_last else None, True, None, 0)
    return Filtered(rebuild(header, payload, kept, new_horizon), True, horizon, len(kept))


def rebuild(
    header: BatchHeader, payload: bytes, kept: list[Scanned], new_horizon: int | None
) -> bytearray:
    """A batch of the `kept` records with the original's metadata (see the module docstring)."""
    lat = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    body = bytearray()
    base_ts = header.base_timestamp
    if new_horizon is None or lat:
        for record in kept:
            body += payload[record[START] : record[END]]
    else:
        for record in kept:
            ts = base_ts + record[TS_DELTA]
            inner = bytearray(payload[record[BODY] : record[BODY] + 1])  # attributes
            inner += varlong(ts - new_horizon)
            inner += payload[record[AFTER_TS] : record[END]]
            body += varint(len(inner))
            body += inner
    if lat or header.max_timestamp == NO_TIMESTAMP:
        max_ts = header.max_timestamp
    else:
        max_ts = max(base_ts + record[TS_DELTA] for record in kept)
    attributes = header.attributes
    if new_horizon is not None:
        base_ts = new_horizon
        attributes |= DELETE_HORIZON_MASK
    codec = Codec(attributes & CODEC_MASK)
    data = compress(codec, body) if codec is not Codec.NONE else bytes(body)
    return _assemble(header, attributes, base_ts, max_ts, len(kept), data)


def empty_batch(header: BatchHeader) -> bytearray:
    """A record-less batch keeping a producer's last sequence (Kafka's retained empty batch)."""
    attributes = header.attributes & ~CODEC_MASK & ~DELETE_HORIZON_MASK
    ts = header.max_timestamp
    return _assemble(header, attributes, ts, ts, 0, b"")


def _assemble(
    header: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int, data: bytes
) -> bytearray:
    new = BatchHeader(
        header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(data), header.partition_leader_epoch,
        MAGIC, 0, attributes, header.last_offset_delta, base_ts, max_ts, header.producer_id,
        header.producer_epoch, header.base_sequence, count,
    )  # fmt: skip
    out = bytearray(HEADER_SIZE)
    new.pack_into(out)
    out += data
    write_crc(out)
    return out
