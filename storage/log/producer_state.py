"""Idempotent-producer state: per producer id, its epoch and last five batches.

Validation follows Kafka's ProducerAppendInfo (after KIP-360): an older epoch
is INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0 unless the
producer has no known epoch; within an epoch a batch must continue the last
sequence (+1, wrapping from Int32.MAX to 0); a producer we hold no state for
is accepted at any sequence (its records may have been removed by retention or
DeleteRecords; refusing would make the client resend and duplicate). A retry
whose (epoch, first sequence, last sequence) matches one of the five retained
batches is a duplicate and gets the original offsets back.

Snapshots (see `strom.storage.log.producer_snapshot`) persist this state; the loader replays the
batch headers after the newest valid one.
"""

from __future__ import annotations

from pathlib import Path

from strom.storage.log import producer_snapshot
from strom.storage.log.producer_entry import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    BatchMetadata,
    ProducerEntry,
    ProducerInfo,
    in_sequence,
)
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode
from strom.wire.records import BatchHeader


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

    def snapshot_offsets(self) -> list[int]:
        return producer_snapshot.snapshot_offsets(self.directory)

    def write_snapshot(self, offset: int, sync: bool = False) -> Path:
        """Persist the current state as of `offset` (the log end offset, or a new segment's base)."""
        return producer_snapshot.write_snapshot(self.directory, offset, self.entries.values(), sync)

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at or below `max_offset`; its offset (None: none usable)."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            entries = producer_snapshot.read_snapshot(self.directory, offset)
            if entries is not None:
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
        producer_snapshot.delete_snapshot(self.directory, offset)


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
            entry.add(header, first_offset, header.last_offset_at(first_offset), timestamp)

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
