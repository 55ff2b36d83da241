"""Idempotent-producer state: per producer id, its epoch and last five batches.

Validation follows Kafka's ProducerAppendInfo (after KIP-360): an older epoch
is INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0 unless the
producer has no known epoch; within an epoch a batch must continue the last
sequence (+1, wrapping from Int32.MAX to 0); a producer we hold no state for
is accepted at any sequence (its records may have been removed by retention or
DeleteRecords; refusing would make the client resend and duplicate). A retry
whose (epoch, first sequence, last sequence) matches one of the five retained
batches is a duplicate and gets the original offsets back.

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

Crash recovery: a snapshot is written to a temp file and renamed, but not
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import crc32c

from broker.log.checkpoint import write_atomic
from broker.log.errors import LogAppendError
from wire.errors import ErrorCode
from wire.records import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"

_MAGIC = b"SPST"
_FILE_HEADER = struct.Struct(">4shIi")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: list[BatchMetadata] = field(default_factory=list)
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.epoch,
            list(self.batches),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def add(self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record an appended data batch (a new epoch forgets the old epoch's batches)."""
        if header.producer_epoch != self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        if header.base_sequence != NO_SEQUENCE:
            meta = BatchMetadata(
                header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp
            )
            self.batches.append(meta)
            del self.batches[:-NUM_BATCHES_TO_RETAIN]
        self.last_timestamp = timestamp
        if header.is_transactional and self.current_txn_first_offset < 0:
            self.current_txn_first_offset = first_offset

    def end_txn(self, header: BatchHeader, coordinator_epoch: int) -> None:
        """Record a commit/abort marker."""
        if header.producer_epoch > self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        self.coordinator_epoch = max(self.coordinator_epoch, coordinator_epoch)
        self.current_txn_first_offset = -1
        self.last_timestamp = header.max_timestamp


@dataclass(frozen=True)
class ProducerInfo:
    """One row of DescribeProducers."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Producer entries of one partition, plus snapshot I/O in its directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.entries: dict[int, ProducerEntry] = {}

    def stage(self, check_sequences: bool = True) -> ProducerAppend:
        """Start checking one append; epochs are always checked, sequences only for clients."""
        return ProducerAppend(self, check_sequences)

    def replay(self, header: BatchHeader) -> None:
        """Apply a batch read back from the log (recovery): no checks."""
        if not header.has_producer_id:
            return
        entry = self.entries.setdefault(header.producer_id, ProducerEntry(header.producer_id))
        if header.is_control:
            entry.end_txn(header, entry.coordinator_epoch)
        else:
            entry.add(header, header.base_offset, header.last_offset, header.max_timestamp)

    def infos(self) -> list[ProducerInfo]:
        return [
            ProducerInfo(
                e.producer_id,
                e.epoch,
                e.last_seq,
                e.last_timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
            for e in self.entries.values()
        ]

    def expire(self, now_ms: int, max_age_ms: int) -> int:
        """Forget producers idle for `max_age_ms` with no open transaction; how many."""
        stale = [
            pid
            for pid, e in self.entries.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= max_age_ms
        ]
        for pid in stale:
            del self.entries[pid]
        return len(stale)

    # --- snapshots -------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        offsets = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            with contextlib.suppress(ValueError):
                offsets.append(int(path.name[: -len(SNAPSHOT_SUFFIX)]))
        return sorted(offsets)

    def write_snapshot(self, offset: int, sync: bool = False) -> Path:
        path = self.snapshot_path(offset)
        write_atomic(path, encode_snapshot(self.entries.values()), sync=sync)
        return path

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at or below `max_offset`; its offset (None: none usable)."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            try:
                entries = decode_snapshot(self.snapshot_path(offset).read_bytes())
            except (OSError, ValueError, struct.error):
                continue
            self.entries = {e.producer_id: e for e in entries}
            return offset
        self.entries = {}
        return None

    def delete_snapshots(self, below: int | None = None, above: int | None = None) -> None:
        """Remove snapshots with offset < below or offset > above."""
        for offset in self.snapshot_offsets():
            if (below is not None and offset < below) or (above is not None and offset > above):
                self.delete_snapshot(offset)

    def delete_snapshot(self, offset: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.snapshot_path(offset))


class ProducerAppend:
    """Producer-state changes of one append, checked against the current state and
    committed only if the whole append is written."""

    def __init__(self, manager: ProducerStateManager, check_sequences: bool) -> None:
        self._manager = manager
        self._check_sequences = check_sequences
        self.updated: dict[int, ProducerEntry] = {}
        self._staged: set[int] = set()

    def duplicate_of(self, header: BatchHeader) -> BatchMetadata | None:
        current = self._manager.entries.get(header.producer_id)
        return None if current is None else current.find_duplicate(header)

    def _entry(self, pid: int) -> tuple[ProducerEntry, ProducerEntry | None]:
        current = self._manager.entries.get(pid)
        if pid not in self.updated:
            self.updated[pid] = current.copy() if current else ProducerEntry(pid)
        return self.updated[pid], current

    def add_batch(
        self, header: BatchHeader, first_offset: int, timestamp: int, coordinator_epoch: int = -1
    ) -> None:
        """Check a batch about to get `first_offset` and stage it; LogAppendError if invalid."""
        entry, current = self._entry(header.producer_id)
        staged = header.producer_id in self._staged
        epoch = header.producer_epoch
        if epoch < entry.epoch:
            raise LogAppendError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {header.producer_id} epoch {epoch} is older than {entry.epoch}",
            )
        if self._check_sequences and not header.is_control:
            self._check_sequence(header, entry, current, staged)
        if header.is_control:
            entry.end_txn(header, coordinator_epoch)
        else:
            self._staged.add(header.producer_id)
            entry.add(header, first_offset, first_offset + header.last_offset_delta, timestamp)

    @staticmethod
    def _check_sequence(
        header: BatchHeader, entry: ProducerEntry, current: ProducerEntry | None, staged: bool
    ) -> None:
        seq, epoch = header.base_sequence, header.producer_epoch
        current_epoch = NO_PRODUCER_EPOCH if current is None else current.epoch
        if epoch != entry.epoch:
            if seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise LogAppendError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {header.producer_id}: new epoch {epoch} must start at sequence 0,"
                    f" not {seq}",
                )
            return
        if staged:
            last = entry.last_seq
        elif current is not None and epoch == current.epoch:
            last = current.last_seq
        else:
            last = NO_SEQUENCE
        if current_epoch != NO_PRODUCER_EPOCH and not in_sequence(last, seq):
            raise LogAppendError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {header.producer_id}: sequence {seq} does not follow {last}",
            )

    def commit(self) -> None:
        self._manager.entries.update(self.updated)


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
