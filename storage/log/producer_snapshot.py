"""Producer-state snapshot files.

Snapshot file `<20-digit offset>.snapshot` (state after every batch below that
offset; written on segment roll and clean shutdown), big-endian::

    0   magic                 4 bytes  b"SPST"
    4   version               int16    2 (1 is still read)
    6   crc                   uint32   CRC-32C of bytes 10..end
    10  producer count        int32
    14  producers, each:
          producerId int64, producerEpoch int16, coordinatorEpoch int32,
          currentTxnFirstOffset int64 (-1: no open transaction), lastTimestamp int64,
          batchCount int8, then per batch (oldest first):
            firstSeq int32, lastSeq int32, firstOffset int64, lastOffset int64,
            timestamp int64
    then, version 2 only:
          unreplicated count int32, then per completed transaction whose marker was
          at or above the high watermark when written (oldest marker first):
            producerId int64, firstOffset int64, lastOffset int64 (the marker's offset),
            aborted int8

Open transactions are the producers with a currentTxnFirstOffset: loading a snapshot
makes them the ongoing transactions again (they hold the last stable offset down).
Version 2 adds the completed-but-unreplicated ones, which also hold it down until the
high watermark passes their marker; a version 1 snapshot loads with none (Kafka's
snapshots never carry them: it forgets them on reload).

Crash recovery: a snapshot is replaced atomically (strom.storage.durable), but not
fsynced on roll (only by `flush`), so a crash may leave it empty or torn; the
CRC catches that and the loader falls back to the next older snapshot (or
none), then replays the batch headers from there to the log end. Snapshots
past the log end (the log was truncated) are deleted.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from strom.storage import disk
from strom.storage.durable import atomic_replace
from strom.storage.log.open_txns import CompletedTxn
from strom.storage.log.producer_entry import BatchMetadata, ProducerEntry

SNAPSHOT_SUFFIX = ".snapshot"

_MAGIC = b"SPST"
_FILE_HEADER = struct.Struct(">4shIi")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")
_COUNT = struct.Struct(">i")
_UNREPLICATED = struct.Struct(">qqqb")
VERSION = 2


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files present, ascending."""
    offsets = []
    for path in disk.glob(directory, f"*{SNAPSHOT_SUFFIX}"):
        with contextlib.suppress(ValueError):
            offsets.append(int(path.name[: -len(SNAPSHOT_SUFFIX)]))
    return sorted(offsets)


def write_snapshot(
    directory: Path,
    offset: int,
    entries: Iterable[ProducerEntry],
    unreplicated: Iterable[CompletedTxn],
    sync: bool,
) -> Path:
    path = snapshot_path(directory, offset)
    atomic_replace(path, encode_snapshot(entries, unreplicated), sync=sync)
    return path


def read_snapshot(
    directory: Path, offset: int
) -> tuple[list[ProducerEntry], list[CompletedTxn]] | None:
    """The entries and unreplicated transactions of one snapshot, or None if it is
    unreadable, torn or corrupt."""
    try:
        return decode_snapshot(disk.read_file(snapshot_path(directory, offset)))
    except (OSError, ValueError, struct.error):
        return None


def delete_snapshot(directory: Path, offset: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        disk.unlink(snapshot_path(directory, offset))


def encode_snapshot(
    entries: Iterable[ProducerEntry],
    unreplicated: Iterable[CompletedTxn] = (),
    version: int = VERSION,
) -> bytes:
    """Serialize producer entries (and, from version 2, unreplicated transactions) in the
    documented layout."""
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
    if version >= 2:
        done = list(unreplicated)
        body += _COUNT.pack(len(done))
        for t in done:
            body += _UNREPLICATED.pack(t.producer_id, t.first_offset, t.last_offset, t.aborted)
    count = _COUNT.pack(len(items))
    crc = crc32c.crc32c(count + body)
    return _FILE_HEADER.pack(_MAGIC, version, crc, len(items))[:10] + count + bytes(body)


def decode_snapshot(data: bytes) -> tuple[list[ProducerEntry], list[CompletedTxn]]:
    """Parse a snapshot (version 1 or 2); ValueError if the magic, version, CRC or framing
    is wrong."""
    if len(data) < _FILE_HEADER.size:
        raise ValueError("snapshot too short")
    magic, version, crc, count = _FILE_HEADER.unpack_from(data)
    if magic != _MAGIC or version not in (1, 2) or crc32c.crc32c(data[10:]) != crc:
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
    unreplicated = []
    if version >= 2:
        (done,) = _COUNT.unpack_from(data, pos)
        pos += _COUNT.size
        for _ in range(done):
            pid, first, last, aborted = _UNREPLICATED.unpack_from(data, pos)
            pos += _UNREPLICATED.size
            unreplicated.append(CompletedTxn(pid, first, last, bool(aborted)))
    if pos != len(data):
        raise ValueError("trailing bytes in snapshot")
    return entries, unreplicated
