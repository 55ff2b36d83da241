"""How metadata records ride the Raft log: entries and snapshot data, encoded and decoded. Pure.

**Records are entries.** A controller command's records become consecutive Raft entries, one
record each, so a record's offset is its entry's offset and a broker's epoch is the offset of
its RegisterBrokerRecord, as in Kafka. Entry layout::

    remaining   uvarint   entries of the same command after this one (0: the last)
    timestamp   int64     the leader's wall clock when it proposed the command (ms, big-endian)
    record      bytes     the metadata record, framed as in `metadata_records.encode_record`

A follower may hold part of a command, so a replica applies a command's records together once
its last entry (remaining 0) is committed. The control entry a new leader writes carries no
record.

**Snapshot data** (what the Raft store keeps as a snapshot's opaque bytes)::

    magic       4 bytes   b"SQC1"
    offset      int64     the image's provenance: last record offset
    epoch       int32     ... its epoch
    timestamp   int64     ... its timestamp
    records     repeated: uvarint length, then a framed metadata record
                          (`kraft_checkpoint.image_records`, which rebuild the image from empty)

Bytes that do not decode raise MetadataError.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import MetadataImage, Provenance
from strom.coordinator.metadata.kraft_checkpoint import image_records
from strom.coordinator.metadata.metadata_records import MetadataError, decode_record, encode_record
from strom.wire.errors import ProtocolError
from strom.wire.message import Message
from strom.wire.primitives import read_uvarint, uvarint

_TIMESTAMP = struct.Struct(">q")
_SNAPSHOT_HEADER = struct.Struct(">4sqiq")
_SNAPSHOT_MAGIC = b"SQC1"


def encode_entries(records: Sequence[Message], timestamp: int) -> list[bytes]:
    """One entry per record; the first says how many follow."""
    count = len(records)
    return [
        uvarint(count - 1 - i) + _TIMESTAMP.pack(timestamp) + encode_record(record)
        for i, record in enumerate(records)
    ]


def decode_entry(data: bytes) -> tuple[int, int, Message]:
    """(entries of the command after this one, timestamp, record); MetadataError if malformed."""
    try:
        remaining, pos = read_uvarint(data, 0)
        (timestamp,) = _TIMESTAMP.unpack_from(data, pos)
    except (ProtocolError, struct.error) as exc:
        raise MetadataError(f"malformed metadata entry: {exc}") from exc
    record, _version = decode_record(memoryview(data)[pos + _TIMESTAMP.size :])
    return remaining, timestamp, record


def encode_snapshot(image: MetadataImage) -> bytes:
    """The image as Raft snapshot data."""
    p = image.provenance
    parts = [_SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, p.offset, p.epoch, p.timestamp)]
    for record in image_records(image):
        framed = encode_record(record)
        parts.append(uvarint(len(framed)) + framed)
    return b"".join(parts)


def decode_snapshot(data: bytes) -> tuple[MetadataImage, MetadataDelta]:
    """The image in snapshot data, and the delta that builds it from empty."""
    try:
        magic, offset, epoch, timestamp = _SNAPSHOT_HEADER.unpack_from(data, 0)
    except struct.error as exc:
        raise MetadataError(f"malformed metadata snapshot: {exc}") from exc
    if magic != _SNAPSHOT_MAGIC:
        raise MetadataError(f"not a metadata snapshot (magic {magic!r})")
    delta = MetadataImage.EMPTY.delta()
    pos, view = _SNAPSHOT_HEADER.size, memoryview(data)
    while pos < len(view):
        try:
            length, pos = read_uvarint(view, pos)
        except ProtocolError as exc:
            raise MetadataError(f"malformed metadata snapshot: {exc}") from exc
        record, _version = decode_record(view[pos : pos + length])
        delta.replay(record)
        pos += length
    return delta.apply(Provenance(offset, epoch, timestamp)), delta
