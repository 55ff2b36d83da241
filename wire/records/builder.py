"""Whole v2 batches: build one from records (any codec), and decode one back to records.

The builder follows the Java client: baseTimestamp is the first record's
timestamp, maxTimestamp the largest, the payload is always compressed when a
codec is asked for, and the CRC is written last. Decoding validates the header
first (see `validate_batch`) and bounds decompression by `max_bytes`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from strom.wire.primitives import Buffer
from strom.wire.records.batch import (
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    TimestampType,
    compute_crc,
    validate_batch,
)
from strom.wire.records.compression import DEFAULT_MAX_DECOMPRESSED, Codec, compress, decompress
from strom.wire.records.record import (
    EndTxnMarker,
    Record,
    decode_records,
    encode_record,
    end_txn_marker_record,
)

_UINT32 = struct.Struct(">I")
_INT32_MAX = 2**31 - 1


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    codec: Codec = Codec.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    max_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """Encode `records` as one complete batch with a valid CRC.

    Record offsets of -1 follow the previous record (the first gets
    `base_offset`); explicit offsets must increase. `max_timestamp` overrides
    the computed one and is required for LOG_APPEND_TIME (the append time).
    Bad arguments raise ValueError: they are programming errors, not input.
    """
    items = list(records)
    if not items:
        raise ValueError("a record batch needs at least one record")
    if timestamp_type is TimestampType.LOG_APPEND_TIME and max_timestamp is None:
        raise ValueError("LOG_APPEND_TIME needs max_timestamp (the log append time)")
    base_timestamp = items[0].timestamp
    body = bytearray()
    next_offset = base_offset
    last_delta = -1
    for record in items:
        offset = next_offset if record.offset == -1 else record.offset
        delta = offset - base_offset
        if delta <= last_delta or delta > _INT32_MAX:
            raise ValueError(
                f"record offset {offset} is out of order or too far from {base_offset}"
            )
        encode_record(
            body, delta, record.timestamp - base_timestamp, record.key, record.value, record.headers
        )
        last_delta = delta
        next_offset = offset + 1
    if max_timestamp is None:
        max_timestamp = max(record.timestamp for record in items)
    payload = compress(codec, body, compression_level) if codec is not Codec.NONE else body

    attributes = int(codec)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    header = BatchHeader(
        base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch, MAGIC, 0,
        attributes, last_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, len(items),
    )  # fmt: skip
    out = bytearray(HEADER_SIZE)
    try:
        header.pack_into(out)
    except struct.error as exc:
        raise ValueError(f"batch field out of range: {exc}") from exc
    out += payload
    _UINT32.pack_into(out, CRC_OFFSET, compute_crc(out))
    return out


def build_control_batch(
    marker: EndTxnMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """A transactional control batch holding one commit/abort marker, as a broker writes it."""
    return build_batch(
        [end_txn_marker_record(marker, timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def batch_payload(
    batch: Buffer, header: BatchHeader, max_bytes: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes | bytearray | memoryview:
    """The record bytes of one whole batch, decompressed if need be (no copy if not)."""
    data = memoryview(batch)[HEADER_SIZE : header.size]
    codec = header.codec
    if codec is Codec.NONE:
        return data
    return decompress(codec, data, max_bytes)


def decode_batch(
    batch: Buffer,
    header: BatchHeader | None = None,
    *,
    check_crc: bool = True,
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> tuple[BatchHeader, list[Record]]:
    """Validate one whole batch (`header` as from `iter_batches`) and decode its records."""
    header = validate_batch(batch, header, check_crc=check_crc)
    return header, decode_records(header, batch_payload(batch, header, max_bytes))
