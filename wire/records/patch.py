"""In-place edits a broker makes to a batch it accepted, without decoding records.

baseOffset and partitionLeaderEpoch lie before the CRC'd range, so assigning
offsets and stamping the leader epoch is two fixed-width writes. Switching to
LogAppendTime changes attributes and maxTimestamp, which the CRC covers, so
that one recomputes the CRC (one hardware CRC-32C pass over the batch).
"""

from __future__ import annotations

import struct

from strom.wire.errors import truncated
from strom.wire.primitives import INT32, INT64
from strom.wire.records.batch import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LEADER_EPOCH_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
    compute_crc,
)

_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")


def patch_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Assign the batch at `pos` its base offset (outside the CRC: no recompute)."""
    INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Stamp the partition leader epoch (outside the CRC: no recompute)."""
    INT32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: bytearray | memoryview,
    max_timestamp: int,
    timestamp_type: TimestampType = TimestampType.LOG_APPEND_TIME,
    pos: int = 0,
) -> None:
    """Set maxTimestamp and the timestamp-type bit, then recompute the CRC.

    With LOG_APPEND_TIME (the broker's use) readers report `max_timestamp` for
    every record in the batch. The batch must span from `pos` to its length.
    """
    view = memoryview(buf)
    if pos < 0 or len(view) - pos < HEADER_SIZE:
        raise truncated("record batch header")
    (length,) = INT32.unpack_from(view, pos + LENGTH_OFFSET)
    batch = view[pos : pos + LOG_OVERHEAD + length]
    if length < MIN_BATCH_LENGTH or len(batch) != LOG_OVERHEAD + length:
        raise truncated("record batch")
    (attributes,) = _INT16.unpack_from(batch, ATTRIBUTES_OFFSET)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    else:
        attributes &= ~TIMESTAMP_TYPE_MASK
    _INT16.pack_into(batch, ATTRIBUTES_OFFSET, attributes)
    INT64.pack_into(batch, MAX_TIMESTAMP_OFFSET, max_timestamp)
    _UINT32.pack_into(batch, CRC_OFFSET, compute_crc(batch))
