"""Producer-state snapshot files.

Snapshot file `<20-digit offset>.snapshot` (state after every batch below that
offset; written on segment roll and clean shutdown), big-endian::

    0   magic                 4 bytes  b"SPST"
    4   version               int16    1
    6   crc                   uint32   CRC-32C of bytes 10..end
    10  producer count        int32
    14  producers, each:
          producerId int64, producerEpoch int16, coordinatorEpoch int32,
          currentTxnFirstOffset int64 (-1 none), lastTimestamp int64,
          batchCount int8, then per batch (oldest first):
            firstSeq int32, lastSeq int32, firstOffset int64, lastOffset int64,
            timestamp int64

Crash recovery: a snapshot is replaced atomically (strom.storage.durable), but not
fsynced on roll (only by `flush`), so a crash may leave it empty or torn; the
CRC catches that and the loader falls back to the next older snapshot (or
none), then replays the batch headers from there to the log end. Snapshots
past the log end (the log was truncated) are deleted.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from strom.storage.durable import atomic_replace
from strom.storage.log.producer_entry import BatchMetadata, ProducerEntry

SNAPSHOT_SUFFIX = ".snapshot"

_MAGIC = b"SPST"
_FILE_HEADER = struct.Struct(">4shIi")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files present, ascending."""
    offsets = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        with contextlib.suppress(ValueError):
            offsets.append(int(path.name[: -len(SNAPSHOT_SUFFIX)]))
    return sorted(offsets)


def write_snapshot(
    directory: Path, offset: int, entries: Iterable[ProducerEntry], sync: bool
) -> Path:
    path = snapshot_path(directory, offset)
    atomic_replace(path, encode_snapshot(entries), sync=sync)
    return path


def read_snapshot(directory: Path, offset: int) -> list[ProducerEntry] | None:
    """The entries of one snapshot, or None if it is unreadable, torn or corrupt."""
    try:
        return decode_snapshot(snapshot_path(directory, offset).read_bytes())
    except (OSError, ValueError, struct.error):
        return None


def delete_snapshot(directory: Path, offset: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(snapshot_path(directory, offset))


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """Serialize producer entries in the documented layout."""
    body = bytearray()
    items = list(entries)
    for e in items:
        body += _PRODUCER.pack(
            e.producer_id,
            e.epoch,
            e.coordinator_epoch,
            e.current_txn_first_offset,
            e.last_timestamp,
            len(e.batches),
        )
        for b in e.batches:
            body += _BATCH.pack(*b)
    count = struct.pack(">i", len(items))
    crc = crc32c.crc32c(count + body)
    return _FILE_HEADER.pack(_MAGIC, 1, crc, len(items))[:10] + count + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    """Parse a snapshot; ValueError if the magic, version, CRC or framing is wrong."""
    if len(data) < _FILE_HEADER.size:
        raise ValueError("snapshot too short")
    magic, version, crc, count = _FILE_HEADER.unpack_from(data)
    if magic != _MAGIC or version != 1 or crc32c.crc32c(data[10:]) != crc:
        raise ValueError("bad snapshot header or CRC")
    pos, entries = _FILE_HEADER.size, []
    for _ in range(count):
        pid, epoch, coord, txn, ts, nbatches = _PRODUCER.unpack_from(data, pos)
        pos += _PRODUCER.size
        batches = [
            BatchMetadata(*_BATCH.unpack_from(data, pos + i * _BATCH.size)) for i in range(nbatches)
        ]
        pos += nbatches * _BATCH.size
        entries.append(ProducerEntry(pid, epoch, batches, coord, txn, ts))
    if pos != len(data):
        raise ValueError("trailing bytes in snapshot")
    return entries
