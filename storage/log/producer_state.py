"""Producer state of one partition: idempotence, transactions, and the last stable offset.

Per producer id (`ProducerEntry`): its epoch, last five batches, coordinator epoch and the
first offset of its open transaction. Checks follow Kafka's ProducerAppendInfo (after
KIP-360), by origin (`AppendOrigin`):

- Epoch (clients and coordinators): a data batch or marker from an epoch older than the
  producer's is INVALID_PRODUCER_EPOCH (Kafka answers this, not PRODUCER_FENCED, since 2.7,
  so the client aborts and carries on). With transactions v2 a marker must carry a newer
  epoch than the producer's (the coordinator bumps it for every marker), except that the
  same epoch with no transaction open is a retried marker and is written again (KAFKA-19999).
  Replication only logs an epoch that goes back: the leader checked it.
- Sequence (clients): a new epoch starts at 0; within an epoch a batch continues the last
  sequence (+1, wrapping from Int32.MAX to 0); a producer with no state is accepted at any
  sequence (its records may have been removed by retention or DeleteRecords); a retry
  matching one of the five retained batches is a duplicate and gets its original offsets.
- Transactions: a non-transactional batch from a producer with an open transaction is
  INVALID_TXN_STATE; a marker whose coordinator epoch is older than the last one seen is
  TRANSACTION_COORDINATOR_FENCED (a zombie coordinator). A marker for a producer without an
  open transaction (unknown, or its transaction had no data here) is written anyway and
  ends nothing, as in Kafka. An empty control batch (a marker the cleaner emptied) changes
  nothing.
- Verification (KIP-890 part 1, see strom.broker.data.txn_verify): a transactional batch
  that would start a transaction needs the partition's current `VerificationGuard` for
  its producer, else INVALID_TXN_STATE; the first transactional batch or a marker clears
  the guard. Guards live in memory only, as in Kafka.

Transactions the log knows of are tracked by `OpenTransactions` (strom.storage.log.open_txns):
the LSO is read from it in O(1). Every completed transaction is handed back to the log
with the LSO right after it, which goes into the segment's aborted-transaction index when
the transaction was aborted (strom.storage.log.txn_index).

Snapshots (strom.storage.log.producer_snapshot) persist the entries and the completed
transactions still above the high watermark; the loader replays the batches after the
newest valid snapshot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from strom.storage.log import producer_snapshot
from strom.storage.log.open_txns import CompletedTxn, OpenTransactions
from strom.storage.log.producer_entry import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    BatchMetadata,
    ProducerEntry,
    ProducerInfo,
    in_sequence,
)
from strom.storage.log.validate import AppendOrigin
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode
from strom.wire.records import BatchHeader, ControlType, EndTxnMarker

log = logging.getLogger(__name__)

TRANSACTIONS_V2 = 2
"""transaction.version at which every marker carries a bumped producer epoch (KIP-890 part 2)."""


class VerificationGuard:
    """Identifies one verification of a producer's transaction on one partition (Kafka's
    VerificationGuard): only the guard the log handed out last lets a batch start a
    transaction, so an answer that raced with a marker is refused."""

    __slots__ = ()

    def __repr__(self) -> str:
        return (
            "VerificationGuard(sentinel)"
            if self is SENTINEL
            else f"VerificationGuard({id(self):#x})"
        )


SENTINEL = VerificationGuard()
"""The guard of no verification: it never verifies anything."""


@dataclass
class VerificationState:
    """A producer whose transaction is being verified on this partition (Kafka's
    VerificationStateEntry): its guard and the lowest sequence seen meanwhile, which a later
    batch may not jump ahead of."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def saw(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class ProducerStateManager:
    """Producer entries, open transactions and verification guards of one partition, plus
    snapshot I/O in its directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.entries: dict[int, ProducerEntry] = {}
        self.txns = OpenTransactions()
        self.verifications: dict[int, VerificationState] = {}

    def stage(
        self, origin: AppendOrigin = AppendOrigin.CLIENT, transaction_version: int = 0
    ) -> ProducerAppend:
        """Start checking one append (see the module docstring for what each origin gets)."""
        return ProducerAppend(self, origin, transaction_version)

    def commit(self, append: ProducerAppend, high_watermark: int) -> list[tuple[CompletedTxn, int]]:
        """Apply a checked append that was written: entries, then the transactions it began
        and ended, in log order. Each ended one comes back with the last stable offset right
        after its marker (what the aborted-transaction index records). Kafka begins all of an
        append's transactions before ending any, so a replica copying many batches at once
        may record a later LSO than its leader did; in log order every replica records the
        same."""
        self.entries.update(append.updated)
        for pid in append.transactional:
            self.verifications.pop(pid, None)
        done = []
        for event in append.events:
            if isinstance(event, CompletedTxn):
                done.append((event, self.txns.last_stable_offset_after(event)))
                self.txns.complete(event, high_watermark)
            else:
                self.txns.begin(*event)
        return done

    def replay(
        self, header: BatchHeader, marker: EndTxnMarker | None, high_watermark: int
    ) -> tuple[CompletedTxn, int] | None:
        """Apply a batch read back from the log (recovery, truncation): no checks. An ended
        transaction comes back with the LSO after it (see `commit`)."""
        if not header.has_producer_id:
            return None
        pid = header.producer_id
        entry = self.entries.get(pid)
        if entry is None:
            entry = self.entries[pid] = ProducerEntry(pid)
        if header.is_control:
            if marker is None:
                return None
            first = entry.current_txn_first_offset
            entry.end_txn(header.producer_epoch, marker.coordinator_epoch, header.max_timestamp)
            if first < 0:
                return None
            txn = CompletedTxn(
                pid, first, header.base_offset, marker.control_type == ControlType.ABORT
            )
            lso = self.txns.last_stable_offset_after(txn)
            self.txns.complete(txn, high_watermark)
            return txn, lso
        open_before = entry.current_txn_first_offset
        entry.add(header, header.base_offset, header.last_offset, header.max_timestamp)
        if open_before < 0 <= entry.current_txn_first_offset:
            self.txns.begin(pid, entry.current_txn_first_offset)
        return None

    def reset(self) -> None:
        """No producers and no transactions (the log restarts empty)."""
        self.entries = {}
        self.txns.clear()

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

    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        """The producer has a transaction open here at `epoch` (Kafka 4.0 compares the epoch:
        with transactions v2 every transaction has its own, so an open one of an older
        epoch is the previous transaction, whose marker has not arrived yet)."""
        entry = self.entries.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0 and entry.epoch == epoch

    def expire(self, now_ms: int, max_age_ms: int) -> int:
        """Forget producers idle for `max_age_ms` with no open transaction (Kafka's
        producer.id.expiration.ms), and verifications as old; how many producers went."""
        stale = [
            pid
            for pid, e in self.entries.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= max_age_ms
        ]
        for pid in stale:
            del self.entries[pid]
        for pid in [p for p, v in self.verifications.items() if now_ms - v.timestamp >= max_age_ms]:
            del self.verifications[pid]
        return len(stale)

    # --- verification (KIP-890 part 1) -------------------------------------------------------

    def start_verification(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int, supports_epoch_bump: bool
    ) -> VerificationGuard | None:
        """The guard a produce must be verified under, or None when the producer's
        transaction is already ongoing here (its start was verified then).

        LogAppendError: INVALID_PRODUCER_EPOCH for an epoch older than the producer's here
        (KAFKA-18042: refused before asking the coordinator); CONCURRENT_TRANSACTIONS when
        the producer's previous transaction (an older epoch) is still open here. That is
        transactions v2's race (KAFKA-18575): EndTxn answers the client with the bumped
        epoch before the markers are written, so the next transaction's first batch can
        reach a partition before the previous one's marker. Appended now it would join
        the previous transaction and take its outcome (an aborted batch committed, or the
        reverse); verifying it would be no better, since the coordinator may complete the
        previous transaction meanwhile. The client retries until the marker is here.
        """
        entry = self.entries.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise LogAppendError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {producer_id} is {epoch}, which is smaller than the last "
                f"seen epoch {entry.epoch}",
            )
        if entry is not None and entry.current_txn_first_offset >= 0:
            if entry.epoch == epoch:
                return None
            raise LogAppendError(
                ErrorCode.CONCURRENT_TRANSACTIONS,
                f"The previous transaction of producer {producer_id} (epoch {entry.epoch}) "
                "is still completing on this partition",
            )
        state = self.verifications.get(producer_id)
        if state is None:
            state = self.verifications[producer_id] = VerificationState(
                now_ms, sequence, epoch, supports_epoch_bump
            )
        state.saw(sequence, epoch)
        return state.guard

    def verified(self, producer_id: int, guard: VerificationGuard) -> bool:
        state = self.verifications.get(producer_id)
        return state is not None and guard is not SENTINEL and state.guard is guard

    # --- snapshots -------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        return producer_snapshot.snapshot_offsets(self.directory)

    def write_snapshot(self, offset: int, sync: bool = False) -> Path:
        """Persist the current state as of `offset` (the log end offset, or a new segment's base)."""
        return producer_snapshot.write_snapshot(
            self.directory, offset, self.entries.values(), self.txns.unreplicated(), sync
        )

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at or below `max_offset`; its offset (None: none usable)."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            loaded = producer_snapshot.read_snapshot(self.directory, offset)
            if loaded is not None:
                entries, unreplicated = loaded
                self.entries = {e.producer_id: e for e in entries}
                self.txns.restore(
                    {
                        e.current_txn_first_offset: e.producer_id
                        for e in entries
                        if e.current_txn_first_offset >= 0
                    },
                    unreplicated,
                )
                return offset
        self.reset()
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
    applied (`ProducerStateManager.commit`) only if the whole append is written."""

    def __init__(
        self, manager: ProducerStateManager, origin: AppendOrigin, transaction_version: int
    ) -> None:
        self._manager = manager
        self._origin = origin
        self._transaction_version = transaction_version
        self.updated: dict[int, ProducerEntry] = {}
        self.events: list[tuple[int, int] | CompletedTxn] = []
        """In log order: (producer id, first offset) of each transaction this append begins,
        and each one its markers end."""
        self.transactional: set[int] = set()
        """Producers with a transactional batch here: their verification guard is spent."""
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
        self,
        header: BatchHeader,
        first_offset: int,
        timestamp: int,
        marker: EndTxnMarker | None = None,
    ) -> None:
        """Check a batch about to get `first_offset` and stage it; LogAppendError if invalid.
        `marker`: the end-transaction marker of a control batch (None: an emptied one)."""
        pid = header.producer_id
        entry, current = self._entry(pid)
        if header.is_transactional:
            self.transactional.add(pid)
        if header.is_control:
            if marker is not None:
                self._add_marker(header, entry, first_offset, timestamp, marker)
            return
        self._check_epoch(header.producer_epoch, entry, first_offset, 0)
        if self._origin is AppendOrigin.CLIENT:
            self._check_sequence(header, entry, current, pid in self._staged)
        open_before = entry.current_txn_first_offset
        if (
            open_before >= 0
            and not header.is_transactional
            and self._origin is not AppendOrigin.REPLICATION
        ):
            raise LogAppendError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {pid} has a transaction open since offset {open_before}:"
                " expected a transactional batch",
            )
        self._staged.add(pid)
        entry.add(header, first_offset, header.last_offset_at(first_offset), timestamp)
        if open_before < 0 <= entry.current_txn_first_offset:
            self.events.append((pid, first_offset))

    def _add_marker(
        self,
        header: BatchHeader,
        entry: ProducerEntry,
        offset: int,
        timestamp: int,
        marker: EndTxnMarker,
    ) -> None:
        pid = header.producer_id
        self._check_epoch(header.producer_epoch, entry, offset, self._transaction_version)
        if entry.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"producer {pid}: marker at offset {offset} from coordinator epoch "
                f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}"
            )
            if self._origin is not AppendOrigin.REPLICATION:
                raise LogAppendError(ErrorCode.TRANSACTION_COORDINATOR_FENCED, message)
            log.info("%s (replicated: kept)", message)
        first = entry.current_txn_first_offset
        if first >= 0:
            self.events.append(
                CompletedTxn(pid, first, offset, marker.control_type == ControlType.ABORT)
            )
        entry.end_txn(header.producer_epoch, marker.coordinator_epoch, timestamp)

    def _check_epoch(self, epoch: int, entry: ProducerEntry, offset: int, tv: int) -> None:
        current = entry.epoch
        stale = epoch <= current if tv >= TRANSACTIONS_V2 else epoch < current
        if not stale:
            return
        if tv >= TRANSACTIONS_V2 and epoch == current and entry.current_txn_first_offset < 0:
            return  # a retried transactions-v2 marker: its transaction already ended (KAFKA-19999)
        message = (
            f"producer {entry.producer_id} epoch {epoch} at offset {offset} is "
            f"{'not newer than' if tv >= TRANSACTIONS_V2 else 'older than'} {current}"
        )
        if self._origin is AppendOrigin.REPLICATION:
            log.warning("%s (replicated: kept)", message)
            return
        raise LogAppendError(ErrorCode.INVALID_PRODUCER_EPOCH, message)

    def _check_sequence(
        self, header: BatchHeader, entry: ProducerEntry, current: ProducerEntry | None, staged: bool
    ) -> None:
        seq, epoch, pid = header.base_sequence, header.producer_epoch, header.producer_id
        current_epoch = NO_PRODUCER_EPOCH if current is None else current.epoch
        verifying = self._manager.verifications.get(pid)
        if verifying is not None:
            if verifying.supports_epoch_bump and seq != 0 and current_epoch == NO_PRODUCER_EPOCH:
                raise LogAppendError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: sequence {seq}, expected 0 for a transactions v2 producer"
                    " with no state here",
                )
            if seq > verifying.lowest_sequence:
                raise LogAppendError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: sequence {seq} is ahead of {verifying.lowest_sequence},"
                    " the earliest seen while verifying",
                )
        if epoch != entry.epoch:
            if seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise LogAppendError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: new epoch {epoch} must start at sequence 0, not {seq}",
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
                f"producer {pid}: sequence {seq} does not follow {last}",
            )
