"""RecordBatch (magic 2) headers: layout, parsing, CRC and validation, never decompressing.

Byte layout of one batch (big-endian; offsets from the batch start)::

     0  baseOffset            int64
     8  batchLength           int32   bytes after this field (= total size - 12)
    12  partitionLeaderEpoch  int32
    16  magic                 int8    always 2 here
    17  crc                   uint32  CRC-32C of bytes 21..end
    21  attributes            int16   bits 0-2 codec (0 none, 1 gzip, 2 snappy,
                                      3 lz4, 4 zstd), bit 3 timestamp type
                                      (1 = LogAppendTime), bit 4 transactional,
                                      bit 5 control, bit 6 delete horizon set
    23  lastOffsetDelta       int32
    27  baseTimestamp         int64
    35  maxTimestamp          int64
    43  producerId            int64
    51  producerEpoch         int16
    53  baseSequence          int32
    57  recordCount           int32
    61  records...                    compressed as one blob when codec != 0

The CRC starts at `attributes`, so a broker may rewrite baseOffset and
partitionLeaderEpoch in place without touching it; changing maxTimestamp or the
timestamp type (LogAppendTime) needs the CRC recomputed (see `patch`). The
produce path runs this per batch (with `iterate`), so nothing here loops over
records or copies the batch.

This module is the only place that knows these byte offsets: code elsewhere reads a
field of bytes it has not parsed yet through the `peek_*` helpers below, and writes a
CRC with `write_crc`.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import crc32c

from strom.wire.errors import ProtocolError, truncated
from strom.wire.primitives import Buffer
from strom.wire.records.compression import Codec, codec_from_id

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the framing shared with legacy messages
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # smallest legal batchLength (49)
MAGIC = 2

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORD_COUNT_OFFSET = 57
RECORDS_OFFSET = HEADER_SIZE

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class TimestampType(IntEnum):
    """Attributes bit 3: who set the timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader:
    """The 61-byte header of one batch, as parsed (a snapshot, not a view)."""

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    def __init__(
        self,
        base_offset: int,
        batch_length: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        record_count: int,
    ) -> None:
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.record_count = record_count

    @classmethod
    def parse(cls, buf: Buffer, pos: int = 0) -> BatchHeader:
        """Parse the header at `pos`; checks magic and the length's lower bound only."""
        if pos < 0 or len(buf) - pos < HEADER_SIZE:
            raise truncated("record batch header")
        header = cls(*HEADER.unpack_from(buf, pos))
        if header.magic != MAGIC:
            raise ProtocolError(f"record batch magic is {header.magic}, expected 2")
        if header.batch_length < MIN_BATCH_LENGTH:
            raise ProtocolError(f"record batch length {header.batch_length} is too small")
        return header

    def pack_into(self, buf: bytearray | memoryview, pos: int = 0) -> None:
        """Write these fields (the crc as stored here) at `pos`."""
        HEADER.pack_into(
            buf, pos, self.base_offset, self.batch_length, self.partition_leader_epoch,
            self.magic, self.crc, self.attributes, self.last_offset_delta,
            self.base_timestamp, self.max_timestamp, self.producer_id,
            self.producer_epoch, self.base_sequence, self.record_count,
        )  # fmt: skip

    @property
    def size(self) -> int:
        """Total bytes of the batch, framing included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def codec(self) -> Codec:
        """The compression codec; CORRUPT_MESSAGE for ids 5-7."""
        return codec_from_id(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes >> 3) & 1)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def offset_count(self) -> int:
        """How many offsets the batch spans, lastOffsetDelta + 1 (a compacted batch keeps its
        span with fewer records)."""
        return self.last_offset_delta + 1

    def last_offset_at(self, base_offset: int) -> int:
        """The batch's last offset once it starts at `base_offset` (an append assigns it)."""
        return base_offset + self.last_offset_delta

    @property
    def last_offset(self) -> int:
        return self.last_offset_at(self.base_offset)

    @property
    def next_offset(self) -> int:
        """The offset the batch after this one starts at."""
        return self.base_offset + self.offset_count

    @property
    def last_sequence(self) -> int:
        """The producer sequence of the last record (wraps at int32 like Kafka)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELD_ORDER)
        return f"BatchHeader({fields})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchHeader):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _FIELD_ORDER)

    __hash__ = None  # type: ignore[assignment]  # mutable


_FIELD_ORDER = (
    "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
    "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
    "producer_id", "producer_epoch", "base_sequence", "record_count",
)  # fmt: skip


# --- fields of bytes not parsed yet (request-level checks before a whole header is read) -----

PEEK_MAGIC_SIZE = MAGIC_OFFSET + 1
"""Bytes a buffer needs from the batch start for `peek_magic` (and `peek_length`)."""
PEEK_CODEC_SIZE = ATTRIBUTES_OFFSET + 2
"""Bytes a buffer needs from the batch start for `peek_attributes`."""


def peek_length(buf: Buffer, pos: int = 0) -> int:
    """The batchLength field of the batch at `pos` (needs LOG_OVERHEAD bytes)."""
    return int(_INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0])


def peek_magic(buf: Buffer, pos: int = 0) -> int:
    """The magic byte of the batch (or legacy message) at `pos`."""
    return int(memoryview(buf)[pos + MAGIC_OFFSET])


def peek_attributes(buf: Buffer, pos: int = 0) -> int:
    """The attributes of the batch at `pos` (needs PEEK_CODEC_SIZE bytes)."""
    return int(_INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0])


def peek_producer(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(producerId, producerEpoch) of the batch at `pos` (needs HEADER_SIZE bytes)."""
    producer_id = int(_INT64.unpack_from(buf, pos + PRODUCER_ID_OFFSET)[0])
    return producer_id, int(_INT16.unpack_from(buf, pos + PRODUCER_EPOCH_OFFSET)[0])


# --- CRC and validation -------------------------------------------------------------------


def write_crc(batch: bytearray | memoryview) -> None:
    """Compute and store the CRC of `batch` (exactly one batch), after editing covered fields."""
    _UINT32.pack_into(batch, CRC_OFFSET, compute_crc(batch))


def compute_crc(batch: Buffer) -> int:
    """CRC-32C over attributes..end of `batch` (exactly one batch)."""
    return int(crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))


def verify_crc(batch: Buffer) -> None:
    """Raise CORRUPT_MESSAGE unless `batch` (exactly one batch) has a correct CRC."""
    if len(batch) < HEADER_SIZE:
        raise truncated("record batch header")
    (stored,) = _UINT32.unpack_from(batch, CRC_OFFSET)
    actual = compute_crc(batch)
    if stored != actual:
        raise ProtocolError(
            f"record batch CRC mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )


def validate_batch(
    batch: Buffer, header: BatchHeader | None = None, *, check_crc: bool = True
) -> BatchHeader:
    """Check one whole batch: framing, magic, codec id, counts and CRC.

    `batch` must be exactly one batch; pass the `header` `iter_batches` yielded
    with it to skip re-parsing. Per-record content is not examined (that needs
    `decode_batch`), so this costs one CRC pass and no Python loop.
    """
    if header is None:
        header = BatchHeader.parse(batch)
    elif header.magic != MAGIC or header.batch_length < MIN_BATCH_LENGTH:
        raise ProtocolError(
            f"bad record batch header: magic {header.magic}, length {header.batch_length}"
        )
    if header.size != len(batch):
        raise ProtocolError(
            f"record batch length {header.batch_length} does not match {len(batch) - LOG_OVERHEAD} bytes"
        )
    if header.attributes & CODEC_MASK > 4:
        raise ProtocolError(f"unknown compression codec id {header.attributes & CODEC_MASK}")
    if header.record_count < 0:
        raise ProtocolError(f"negative record count {header.record_count}")
    if header.last_offset_delta < 0:
        raise ProtocolError(f"negative last offset delta {header.last_offset_delta}")
    if check_crc:
        actual = compute_crc(batch)
        if actual != header.crc:
            raise ProtocolError(
                f"record batch CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}"
            )
    return header
