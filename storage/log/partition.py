"""A partition's log: ordered segments plus offsets, producer state and epoch history.

Offsets: log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset
(the next offset to assign). On a single node the high watermark follows the log end.
The last stable offset (LSO) is the high watermark, or the first offset of the oldest
transaction still undecided or whose marker is not yet below the high watermark
(strom.storage.log.open_txns), whichever is smaller, never below the log start.

Transactions: data batches flagged transactional open a transaction for their producer
(its first offset holds the LSO down); a commit or abort marker (a control batch,
`append_marker` on the leader, replicated as-is to followers) ends it, and an aborted one
gets an entry in the marker's segment's `.txnindex` (strom.storage.log.txn_index), which
read_committed fetches turn into their aborted-transactions list.

Threading: everything is synchronous and meant for the broker's event-loop
thread, except `flush()`, which fsyncs and so runs in a worker thread, and the
cleaner's calls (`clean_view`, `dup_segment_fds`, `replace_segments`), made
from its own thread. Every public method takes the log's lock itself (callers
hold none); appends, reads, queries and trims hold it throughout, so a reader
never sees a segment list the cleaner is swapping. `flush()` holds it only to
write out pending index entries and take fds of segments with unflushed data,
and to publish the new recovery point, never across an fsync.

Rolls: a new active segment starts at the log end; the old one's index
entries are written out (no fsync: the flush the roll requests does that) and
its `.log` fd is let go; producers are snapshotted at the new base offset.

Head: DeleteRecords and retention advance the log start offset, then delete
every segment wholly below it, oldest first (rolling first if that includes
the active one, as Kafka does, so what is deleted is never the active segment).
Retention (Kafka's rules): from the oldest segment on, while its largest
timestamp is more than retention.ms old, or while dropping it still leaves at
least retention.bytes; compact-only logs are exempt.
Tail: `truncate_to` (replication) drops everything from an offset on. Both keep
the epoch history and producer state in step.

The cleaner's side: it works on closed segments, which never change once
rolled, so it reads them without the lock (through fds it dup'd under the
lock, so a concurrent delete or close cannot pull a file from under it). Only
`replace_segments` changes the log, under the lock: it checks that the
segments it cleaned are still exactly where they were (retention,
DeleteRecords, truncation or deletion may have removed or changed them
meanwhile; then the attempt is dropped), deletes them, installs the cleaned
segment (strom.storage.log.swap) and publishes a *new* segment list, so readers
holding the old list keep a coherent picture.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from pathlib import Path

from strom.storage import disk
from strom.storage.durable import fsync_dir, fsync_file
from strom.storage.fileio import SegmentFile
from strom.storage.log.clean_view import CleanView
from strom.storage.log.index import NO_TIMESTAMP
from strom.storage.log.log_config import LONG_MAX, LogConfig
from strom.storage.log.log_loader import (
    LoadedLog,
    iter_batches_from,
    load_partition,
    new_segment,
    read_marker,
)
from strom.storage.log.producer_entry import ProducerInfo
from strom.storage.log.producer_state import ProducerAppend, VerificationGuard
from strom.storage.log.recompress import recompress
from strom.storage.log.results import AppendResult, ReadResult, SegmentInfo
from strom.storage.log.segment import LogSegment
from strom.storage.log.segment_lookup import (
    Found,
    find_max_timestamp,
    find_timestamp,
    segment_index,
)
from strom.storage.log.swap import discard, install
from strom.storage.log.txn_index import AbortedTxn
from strom.storage.log.validate import AppendOrigin, validate_records, validate_replicated
from strom.storage.log_errors import KafkaStorageError, LogAppendError, OffsetOutOfRange
from strom.wire.errors import ErrorCode
from strom.wire.records import (
    BatchHeader,
    ControlType,
    EndTxnMarker,
    build_control_batch,
    patch_base_offset,
    patch_leader_epoch,
    set_max_timestamp,
)

log = logging.getLogger(__name__)
TIMESTAMP_TYPE_MASK = 0x08
_JITTER_RNG = random.Random()  # for segment.jitter.ms, shared: its state is 2.5 KB a log


class PartitionLog:
    """The storage of one topic-partition; see the module docstring for threading."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        loaded: LoadedLog,
        clock: Callable[[], int],
        rng: random.Random | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        self._rng = rng or _JITTER_RNG
        self._segments: list[LogSegment] = loaded.segments
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        self.epochs = loaded.epochs
        self.producer_state = loaded.producers
        self._high_watermark = self.log_end_offset
        self._aborted_segments: list[LogSegment] | None = None
        """Segments whose `.txnindex` has entries, oldest first (None: to be recomputed)."""
        self.high_watermark_follows_appends = True
        """Single-replica partitions: an append is committed at once. A replicated partition
        turns this off; its leader moves the high watermark as followers catch up."""
        self.checkpointed_high_watermark: int | None = None
        """The high watermark in the replication-offset-checkpoint at load (LogManager; the log
        start when the checkpoint has none): where a replicated log's high watermark restarts
        (`restore_high_watermark`). None for a log created in this run, or once restored."""
        self.last_flush_ms = clock()
        self.flush_requested = False
        self.parent_unsynced = False
        """A new directory whose entry in the data dir the first flush must make durable."""
        self.on_flush_wanted: Callable[[], None] | None = None
        """Told after a roll, and after appends under a finite flush policy (LogManager)."""
        self.failed: str | None = None
        self.closed = False
        self.generation = 0
        """Bumped by truncation: a cleaning pass planned before it must not commit."""
        self.clean_offset: int | None = None
        """The cleaner's checkpoint: everything below was cleaned (None: never cleaned)."""
        self.tombstone_horizon_ms: int | None = None
        """The earliest delete horizon of tombstones left by the last pass (in memory only)."""
        self._lock = threading.Lock()
        self._pending_snapshots: list[Path] = []
        active = self._segments[-1]
        active.roll_jitter_ms = config.random_jitter(self._rng)
        active.set_index_limits(config.index_interval_bytes, config.segment_index_bytes)

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        clock: Callable[[], int],
        clean: bool = True,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        rng: random.Random | None = None,
        high_watermark: int | None = None,
    ) -> PartitionLog:
        """Open or create the log in `directory` (created if missing), recovering if unclean.
        `high_watermark`: the checkpointed one of a replicated log (see `load_partition`)."""
        disk.makedirs(directory)
        loaded = load_partition(
            directory,
            config,
            clean=clean,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            now_ms=clock(),
            high_watermark=high_watermark,
        )
        return cls(directory, topic, partition, config, loaded, clock, rng)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        """Everything below is on every in-sync replica (committed); consumers read up to it."""
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = offset
        self.producer_state.txns.forget_below(offset)

    @property
    def last_stable_offset(self) -> int:
        """The LSO (module docstring): read_committed consumers read up to it. O(1)."""
        hw = self._high_watermark
        first = self.producer_state.txns.first_unstable_offset(hw)
        if first is None or first >= hw:
            return hw
        return max(first, self.log_start_offset)

    # --- append ----------------------------------------------------------------------------

    def append(
        self,
        records: memoryview | bytes | bytearray,
        leader_epoch: int,
        now_ms: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification: VerificationGuard | None = None,
        transaction_version: int = 0,
    ) -> AppendResult:
        """Validate, assign offsets and write; LogAppendError leaves the log unchanged.

        `verification`: the guard a transactional produce was verified under (KIP-890,
        `start_verification`); given, a transactional batch that would start its
        producer's transaction here is INVALID_TXN_STATE unless the guard is still current.
        None: no verification (disabled, or no coordinator to ask). `transaction_version`:
        of the coordinator writing a marker (2: its producer epoch must be a bumped one).
        """
        with self._lock:
            if self.failed is not None or self.closed:
                raise KafkaStorageError(f"{self.name} is offline: {self.failed or 'closed'}")
            buf = bytearray(records)
            batches = validate_records(buf, self.config, now_ms, origin)
            buf, batches = recompress(buf, batches, self.config)
            lat = self.config.log_append_time
            staged = self.producer_state.stage(origin, transaction_version)
            offset = self.log_end_offset
            for pos, header in batches:
                if header.has_producer_id:
                    if origin is AppendOrigin.CLIENT:
                        dup = staged.duplicate_of(header)
                        if dup is not None:
                            return AppendResult(
                                dup.first_offset,
                                dup.last_offset,
                                dup.timestamp if lat else -1,
                                self.log_start_offset,
                                duplicate=True,
                            )
                    if verification is not None:
                        self._check_verified(header, verification)
                    staged.add_batch(
                        header,
                        offset,
                        now_ms if lat else header.max_timestamp,
                        _end_txn_marker(buf, pos, header, strict=True),
                    )
                offset += header.offset_count
            base = self.log_end_offset
            self._assign(buf, batches, base, leader_epoch, now_ms if lat else None)
            self._write(buf, batches, [(leader_epoch, base)], now_ms)
            self._commit_producers(staged)
            if self.high_watermark_follows_appends:
                self.high_watermark = self.log_end_offset
            if self.config.flush_messages < LONG_MAX or self.config.flush_ms < LONG_MAX:
                self._want_flush()
            return AppendResult(
                base, self.log_end_offset - 1, now_ms if lat else -1, self.log_start_offset
            )

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
        now_ms: int,
        *,
        transaction_version: int = 0,
    ) -> AppendResult:
        """Write a transaction marker: a control batch of one COMMIT (`commit`) or ABORT
        record carrying `coordinator_epoch`, from `producer_id`/`producer_epoch`, stamped
        `now_ms` (Kafka's `MemoryRecords.withEndTransactionMarker`, appended with origin
        COORDINATOR). It ends the producer's open transaction here (an aborted one is
        indexed); for a producer with none, or one the log does not know, it is written
        anyway and ends nothing, as in Kafka. LogAppendError: INVALID_PRODUCER_EPOCH (an
        epoch older than the producer's; with `transaction_version` 2 not newer, unless it
        retries a marker already written), TRANSACTION_COORDINATOR_FENCED (a coordinator
        epoch older than the last marker's), KAFKA_STORAGE_ERROR. The broker's
        `strom.broker.data.txn_markers` calls this on the leader and waits for the ISR.
        """
        marker = EndTxnMarker(
            ControlType.COMMIT if commit else ControlType.ABORT, coordinator_epoch
        )
        batch = build_control_batch(
            marker, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=now_ms
        )
        return self.append(
            batch,
            leader_epoch,
            now_ms,
            origin=AppendOrigin.COORDINATOR,
            transaction_version=transaction_version,
        )

    def start_verification(
        self, producer_id: int, sequence: int, epoch: int, supports_epoch_bump: bool
    ) -> VerificationGuard | None:
        """KIP-890: the guard to verify a transactional produce under (None: the producer's
        transaction is already ongoing here at that epoch, nothing to verify); LogAppendError
        INVALID_PRODUCER_EPOCH or CONCURRENT_TRANSACTIONS (`ProducerState.start_verification`).
        See strom.broker.data.txn_verify."""
        with self._lock:
            return self.producer_state.start_verification(
                producer_id, sequence, epoch, self.clock(), supports_epoch_bump
            )

    def _check_verified(self, header: BatchHeader, guard: VerificationGuard) -> None:
        """Kafka's analyzeAndValidateProducerState: a transactional batch may start a
        transaction (none open here at its epoch) only under the producer's current
        verification guard; a stale epoch is INVALID_PRODUCER_EPOCH first (KAFKA-19690:
        retriable for the client, where INVALID_TXN_STATE would be fatal)."""
        pid, epoch = header.producer_id, header.producer_epoch
        state = self.producer_state
        if (
            not header.is_transactional
            or header.is_control
            or state.has_ongoing_transaction(pid, epoch)
        ):
            return
        entry = state.entries.get(pid)
        if entry is not None and epoch < entry.epoch:
            raise LogAppendError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen "
                f"epoch {entry.epoch}",
            )
        if not state.verified(pid, guard):
            raise LogAppendError(
                ErrorCode.INVALID_TXN_STATE, "Record was not part of an ongoing transaction"
            )

    def _commit_producers(self, staged: ProducerAppend) -> None:
        """Apply an append's producer changes; index the transactions it aborted in the active
        segment, which holds their markers (lock held, after the write)."""
        active = self._segments[-1]
        for txn, lso in self.producer_state.commit(staged, self._high_watermark):
            if txn.aborted:
                active.txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                )
                aborted = self._aborted_segments
                if aborted is not None and (not aborted or aborted[-1] is not active):
                    aborted.append(active)

    @staticmethod
    def _assign(
        buf: bytearray,
        batches: list[tuple[int, BatchHeader]],
        base: int,
        leader_epoch: int,
        append_time: int | None,
    ) -> None:
        """Patch offsets, leader epoch and (LogAppendTime) max timestamp into the request bytes."""
        view = memoryview(buf)
        offset = base
        for pos, header in batches:
            patch_base_offset(buf, offset, pos)
            patch_leader_epoch(buf, leader_epoch, pos)
            header.base_offset, header.partition_leader_epoch = offset, leader_epoch
            if append_time is not None:
                set_max_timestamp(view[pos : pos + header.size], append_time)
                header.max_timestamp = append_time
                header.attributes |= TIMESTAMP_TYPE_MASK
            offset = header.next_offset

    def append_replicated(
        self, records: memoryview | bytes | bytearray, now_ms: int
    ) -> AppendResult:
        """A follower's append of batches fetched from its leader, kept byte for byte.

        Offsets, leader epochs and timestamps are the leader's; the records were validated
        when the leader appended them (see `validate_replicated` for what is checked here).
        The high watermark does not move: the leader's, from each fetch response, sets it
        (`update_high_watermark`). LogAppendError leaves the log unchanged.
        """
        with self._lock:
            if self.failed is not None or self.closed:
                raise KafkaStorageError(f"{self.name} is offline: {self.failed or 'closed'}")
            buf = bytearray(records)
            batches = validate_replicated(buf, self.log_end_offset)
            staged = self.producer_state.stage(AppendOrigin.REPLICATION)
            epochs: list[tuple[int, int]] = []
            for pos, header in batches:
                if not epochs or header.partition_leader_epoch > epochs[-1][0]:
                    epochs.append((header.partition_leader_epoch, header.base_offset))
                if header.has_producer_id:
                    staged.add_batch(
                        header,
                        header.base_offset,
                        header.max_timestamp,
                        _end_txn_marker(buf, pos, header, strict=False),
                    )
            base = batches[0][1].base_offset
            self._write(buf, batches, epochs, now_ms)
            self._commit_producers(staged)
            if self.config.flush_messages < LONG_MAX or self.config.flush_ms < LONG_MAX:
                self._want_flush()
            return AppendResult(base, self.log_end_offset - 1, -1, self.log_start_offset)

    def start_leader_epoch(self, epoch: int) -> None:
        """This replica becomes leader in `epoch`: the epoch starts at the log end (Kafka's
        assignEpochStartOffset), so OffsetForLeaderEpoch and a follower's divergence check
        see it before its first batch, and an older epoch's end is known at once."""
        with self._lock:
            if self.epochs.assign(epoch, self.log_end_offset):
                self.epochs.save(sync=False)  # re-derived on load from the batches if lost

    def restore_high_watermark(self) -> None:
        """A replicated log's first role after loading: its high watermark goes back to the
        checkpointed one, as Kafka's replicas reopen; everything past it
        may be a tail no other replica holds. Once only."""
        with self._lock:
            checkpointed, self.checkpointed_high_watermark = self.checkpointed_high_watermark, None
            if checkpointed is None:
                return
            self.high_watermark = max(
                self.log_start_offset, min(checkpointed, self.log_end_offset, self.high_watermark)
            )

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, kept within [log start, log end]; the value set."""
        with self._lock:
            self.high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
            return self.high_watermark

    def _write(
        self,
        buf: bytearray,
        batches: list[tuple[int, BatchHeader]],
        epochs: list[tuple[int, int]],
        now_ms: int,
    ) -> None:
        """Epoch checkpoint first (harmless if the data then fails), roll if due, then one write.

        `epochs`: (leader epoch, start offset) of each epoch the batches begin, in order.
        """
        old_epochs = list(self.epochs.entries)
        try:
            changed = False
            for epoch, start in epochs:
                changed = self.epochs.assign(epoch, start) or changed
            if changed:
                self.epochs.save(
                    sync=False
                )  # the next flush fsyncs it (see strom.storage.log.epoch)
            active = self._segments[-1]
            max_ts = max(h.max_timestamp for _, h in batches)
            if active.should_roll(
                len(buf),
                max_ts,
                batches[-1][1].last_offset,
                self.config.segment_bytes,
                self.config.roll_ms,
                now_ms,
            ):
                self._roll(now_ms)
            self._segments[-1].append(memoryview(buf), batches)
        except OSError as exc:
            self.epochs.entries = old_epochs
            self.failed = f"{type(exc).__name__}: {exc}"
            log.error("%s: storage error on append, taking partition offline: %s", self.name, exc)
            raise KafkaStorageError(f"{self.name}: {exc}") from exc

    def _roll(self, now_ms: int) -> None:
        """Start a new active segment at the log end; snapshot producers there (OSError propagates)."""
        old = self._segments[-1]
        old.seal()
        old.write_indexes()
        segment = new_segment(
            self.directory,
            self.log_end_offset,
            self.config,
            now_ms,
            self.config.random_jitter(self._rng),
        )
        if segment.size:
            segment.close()
            raise OSError(f"segment file {segment.path} already exists and is not empty")
        self._segments.append(segment)
        old.set_active(False)
        try:
            self._pending_snapshots.append(self.producer_state.write_snapshot(segment.base_offset))
        except OSError as exc:
            log.warning(
                "%s: producer snapshot at %d failed: %s",
                self.directory.name,
                segment.base_offset,
                exc,
            )
        self.flush_requested = True
        self._want_flush()
        log.debug("%s: rolled segment at %d", self.directory.name, segment.base_offset)

    # --- read ------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        min_one_batch: bool = True,
        max_offset: int | None = None,
        *,
        aborted: bool = False,
    ) -> ReadResult:
        """Whole batches from the one containing `offset`, within one segment, up to max_bytes.
        `aborted` (read_committed): the result also lists the aborted transactions that
        overlap the batches read (`ReadResult.aborted_transactions`)."""
        with self._lock:
            file, position, size = self._read(offset, max_bytes, min_one_batch, max_offset)
            found = None
            if aborted:
                found = self._aborted_in(offset, file, position, size) if size else []
            return ReadResult(
                file,
                position,
                size,
                self.log_start_offset,
                self.log_end_offset,
                self._high_watermark,
                self.last_stable_offset,
                found,
            )

    def _aborted_in(
        self, offset: int, file: SegmentFile | None, position: int, size: int
    ) -> list[AbortedTxn]:
        """Kafka's addAbortedTransactions: the aborted transactions overlapping [offset, the
        first offset after the batches read). Nothing to search (the usual case: no
        transaction was ever aborted from this segment on) costs no I/O."""
        if not self._aborted_from(offset):
            return []
        return self._collect_aborted(offset, self._upper_bound(offset, file, position + size))

    def _aborted_segment_list(self) -> list[LogSegment]:
        aborted = self._aborted_segments
        if aborted is None:
            aborted = self._aborted_segments = [s for s in self._segments if s.txn_index.count]
        return aborted

    def _aborted_from(self, offset: int) -> list[LogSegment]:
        """Segments with aborted transactions, from the one holding `offset` on (a marker
        below that segment cannot end a transaction reaching `offset`)."""
        aborted = self._aborted_segment_list()
        if not aborted:
            return aborted
        base = self._segments[segment_index(self._segments, offset)].base_offset
        i = 0
        while i < len(aborted) and aborted[i].base_offset < base:
            i += 1
        return aborted[i:]

    def _collect_aborted(self, offset: int, upper: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions: walk the segments' indexes from the one holding
        `offset`, stopping at an entry whose last stable offset reaches `upper`."""
        found: list[AbortedTxn] = []
        for segment in self._aborted_from(offset):
            if segment.txn_index.collect(offset, upper, found):
                break
        return found

    def aborted_transactions(self, offset: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [offset, upper) (their markers at or after
        `offset`, their first offsets below `upper`)."""
        with self._lock:
            return self._collect_aborted(offset, upper)

    def _upper_bound(self, offset: int, file: SegmentFile | None, end: int) -> int:
        """Kafka's bound for the aborted transactions a read from `offset` that ended at byte
        `end` of `file` reports (LocalLog.addAbortedTransactions): the offset of the first
        offset-index entry at or after `end` in that segment, else the next segment's base,
        else the log end. The index is sparse, so this may reach past the batches read (Kafka
        reports those transactions too; a consumer ignores what it does not read)."""
        segments = self._segments
        i = segment_index(segments, offset)
        while i < len(segments) and (file is None or segments[i].path != file.path):
            i += 1  # the read skipped segments the cleaner emptied past `offset`
        if i == len(segments) or file is None:
            return self.log_end_offset
        bound = segments[i].offset_index.upper_bound_offset(end)
        if bound is not None:
            return bound
        return segments[i + 1].base_offset if i + 1 < len(segments) else self.log_end_offset

    def _read(
        self, offset: int, max_bytes: int, min_one_batch: bool, max_offset: int | None
    ) -> tuple[SegmentFile | None, int, int]:
        """(file, position, size) of the read (see `read`)."""
        start, end = self.log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRange(offset, start, end)
        limit = end if max_offset is None else min(max_offset, end)
        segments = self._segments
        for segment in segments[segment_index(segments, offset) :]:
            if offset >= limit:
                break
            file = segment.open_file()  # one open for the lookups below and the result
            found = segment.find_batch(offset)
            if found is None:
                continue
            pos, header = found
            bound = segment.size
            if limit < segment.next_offset:
                stop = segment.find_batch(limit)
                bound = stop[0] if stop is not None else segment.size
            if pos + header.size > bound or (header.size > max_bytes and not min_one_batch):
                break
            stop_at = max(pos + max(max_bytes, 0), pos + header.size)
            size = segment.boundary_at_or_before(min(stop_at, bound), pos) - pos
            return file, pos, size
        return None, 0, 0

    # --- queries ---------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> Found | None:
        """(offset, timestamp, leader_epoch) of the first record with timestamp >= `timestamp`
        at or after the log start; None if there is none (ListOffsets then answers -1)."""
        with self._lock:
            for segment in self._segments:
                if (
                    segment.max_timestamp >= timestamp
                    and segment.next_offset > self.log_start_offset
                ):
                    found = find_timestamp(segment, timestamp, self.log_start_offset)
                    if found is not None:
                        return found
            return None

    def max_timestamp_offset(self) -> Found | None:
        """ListOffsets MAX_TIMESTAMP (-3): the first record holding the largest timestamp."""
        with self._lock:
            best: LogSegment | None = None
            for segment in self._segments:
                if segment.next_offset <= self.log_start_offset:
                    continue
                if segment.max_timestamp != NO_TIMESTAMP and (
                    best is None or segment.max_timestamp > best.max_timestamp
                ):
                    best = segment
            return None if best is None else find_max_timestamp(best)

    def latest_epoch(self) -> int | None:
        """The newest leader epoch that wrote to this log (None if none recorded)."""
        return self.epochs.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (leader_epoch, end_offset); (-1, -1) when unknown.

        The latest epoch ends at the log end; an older one ends where the next
        known epoch starts, reported with the largest known epoch <= the request.
        """
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_at(self, offset: int) -> int | None:
        """The leader epoch that wrote `offset` (for fetch epoch validation)."""
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        return self.epochs.epoch_at(offset)

    # --- durability ------------------------------------------------------------------------

    def _want_flush(self) -> None:
        """Tell the LogManager this log may want a flush (it checks only the logs it was told of)."""
        if self.on_flush_wanted is not None:
            self.on_flush_wanted()

    def flush(self) -> None:
        """fsync every segment holding unflushed data (and its indexes, written out first), then
        advance the recovery point."""
        fds: list[int] = []
        try:
            with self._lock:
                if self.closed:
                    return
                target = self.log_end_offset
                for s in self._segments:
                    if s.next_offset > self.recovery_point or s is self._segments[-1]:
                        fds.extend(s.sync_fds())
                snapshots, self._pending_snapshots = self._pending_snapshots, []
                if self.epochs.unsynced:
                    snapshots.append(self.epochs.path)
                    self.epochs.unsynced = False
            for fd in fds:
                disk.fsync(fd)
            for path in snapshots:  # missing_ok: deleted meanwhile (see strom.storage.durable)
                fsync_file(path, missing_ok=True)
            fsync_dir(self.directory, missing_ok=True)  # renamed meanwhile for deletion
            if self.parent_unsynced:
                fsync_dir(self.directory.parent)
                self.parent_unsynced = False
        except OSError as exc:
            with self._lock:
                self.failed = f"flush failed: {exc}"
            raise KafkaStorageError(f"{self.name}: flush failed: {exc}") from exc
        finally:
            for fd in fds:
                disk.close(fd)
        with self._lock:
            self.recovery_point = max(self.recovery_point, target)
            self.last_flush_ms = self.clock()
            self.flush_requested = False

    def flush_owed(self) -> bool:
        """flush.messages says this append must be flushed before it is acknowledged (leader)
        or fetched past (follower), as Kafka flushes inside the append: unflushed messages
        reached it."""
        return self.log_end_offset - self.recovery_point >= self.config.flush_messages

    def flush_due(self, now_ms: int) -> bool:
        """Whether flush.messages / flush.ms (or a just-rolled segment) call for a flush now."""
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        return (
            self.flush_requested
            or unflushed >= self.config.flush_messages
            or now_ms - self.last_flush_ms >= self.config.flush_ms
        )

    def close(self, *, clean: bool = True) -> None:
        """Close the log. `clean` (shutdown) seals, fsyncs, snapshots producers at the log end
        and closes every fd now; otherwise (topic deletion) nothing is written and segment fds
        stay open until the last ReadResult using them is gone."""
        if self.closed:
            return
        try:
            if clean and self.failed is None:
                with self._lock:
                    self._segments[-1].seal()
                self.flush()
                end = self.log_end_offset
                self.producer_state.write_snapshot(end, sync=True)
                keep = {s.base_offset for s in self._segments} | {end}
                for offset in self.producer_state.snapshot_offsets():
                    if offset not in keep:
                        self.producer_state.delete_snapshot(offset)
        finally:
            with self._lock:
                for segment in self._segments:
                    segment.close(release=not clean)
                self.closed = True

    # --- head ------------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords (-1 = high watermark): advance the log start; the new log start offset."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.high_watermark)
        with self._lock:
            if offset > self.log_start_offset:
                self._advance_start(offset, self.clock())
        return self.log_start_offset

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the oldest segments past retention.ms / retention.bytes; how many went."""
        if not self.config.delete:
            return 0
        with self._lock:
            segments = self._segments
            count = 0
            if self.config.retention_ms >= 0:
                for segment in segments:
                    age = now_ms - segment.largest_timestamp()
                    if segment.size == 0 or age <= self.config.retention_ms:
                        break
                    if not self._below_high_watermark(count):
                        break
                    count += 1
            if self.config.retention_bytes >= 0:
                excess = sum(s.size for s in segments[count:]) - self.config.retention_bytes
                while (
                    count < len(segments)
                    and 0 < segments[count].size <= excess
                    and self._below_high_watermark(count)
                ):
                    excess -= segments[count].size
                    count += 1
            if count:
                end = segments[count].base_offset if count < len(segments) else self.log_end_offset
                self._advance_start(max(end, self.log_start_offset), now_ms)
            return count

    def _below_high_watermark(self, i: int) -> bool:
        """Kafka's retention bound: segment `i` may go only if it lies wholly below the high
        watermark (its next segment's base, or the log end, is at most the high watermark), so
        the log start never passes it. An open transaction does not stop retention (nor in
        Kafka): its producer state stays, and the LSO is then held at the new log start."""
        segments = self._segments
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else self.log_end_offset
        return self._high_watermark >= upper

    def _advance_start(self, offset: int, now_ms: int) -> None:
        """Move the log start (lock held) and delete the segments wholly below it."""
        self.log_start_offset = offset
        self.producer_state.txns.forget_below(offset)
        self._aborted_segments = None
        if self.epochs.truncate_from_start(offset):
            self.epochs.save(sync=False)  # re-derived on load if lost
        segments = self._segments
        count = 0
        while count < len(segments):
            if count + 1 < len(segments):
                below = segments[count + 1].base_offset <= offset
            else:
                below = segments[count].size > 0 and segments[count].next_offset <= offset
            if not below:
                break
            count += 1
        if count == len(segments):
            self._roll(now_ms)
        for segment in segments[:count]:
            log.info(
                "%s: deleting segment %d below log start %d",
                self.directory.name,
                segment.base_offset,
                offset,
            )
            segment.delete()
        del segments[:count]
        first = segments[0].base_offset
        keep = max((o for o in self.producer_state.snapshot_offsets() if o <= first), default=first)
        self.producer_state.delete_snapshots(below=keep)

    # --- tail ------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after `offset` (a batch straddling it goes too)."""
        with self._lock:
            if offset >= self.log_end_offset:
                # nothing to cut, but an epoch this replica started at its log end as leader,
                # appending nothing before another was elected, conflicts with the new leader's
                # log: drop it (Kafka's truncateTo does too), or the next fetch diverges again
                if self.epochs.truncate_from_end(self.log_end_offset):
                    self.epochs.save(sync=False)
                return
            self.generation += 1
            self._aborted_segments = None
            if offset < self.log_start_offset:
                self._restart_at(offset)
                return
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._segments.pop().delete()
            active = self._segments[-1]
            active.set_active(True)
            active.truncate_to(offset)
            active.set_index_limits(
                self.config.index_interval_bytes, self.config.segment_index_bytes
            )
            end = self.log_end_offset
            self.log_start_offset = min(self.log_start_offset, end)
            if self.epochs.truncate_from_end(end):
                self.epochs.save(sync=False)  # re-derived on load if lost
            self._rebuild_producers(end)
            self.recovery_point = min(self.recovery_point, end)
            self.high_watermark = min(self.high_watermark, end)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Discard the whole log and continue, empty, from `offset`."""
        with self._lock:
            self._restart_at(offset)

    def _restart_at(self, offset: int) -> None:
        self.generation += 1
        self._aborted_segments = None
        for segment in self._segments:
            segment.delete()
        self._segments[:] = [
            new_segment(
                self.directory,
                offset,
                self.config,
                self.clock(),
                self.config.random_jitter(self._rng),
            )
        ]
        self.log_start_offset = self.recovery_point = offset
        self.producer_state.reset()
        self.high_watermark = offset
        self.epochs.entries = []
        self.epochs.save()
        self.producer_state.delete_snapshots(below=2**63)

    def _rebuild_producers(self, end: int) -> None:
        """Producer state as of `end`: newest snapshot at or below it, plus replay (the
        aborted-transaction indexes below `end` are kept as they are)."""
        self.producer_state.delete_snapshots(above=end)
        snapshot = self.producer_state.load_latest_snapshot(end)
        start = max(snapshot or 0, self._segments[0].base_offset)
        hw = min(self._high_watermark, end)
        for _, header, marker in iter_batches_from(self._segments, start):
            if header.base_offset >= start:
                self.producer_state.replay(header, marker, hw)

    # --- the cleaner's side ----------------------------------------------------------------

    def clean_view(self) -> CleanView | None:
        """A snapshot for planning, or None when the log is closed or failed."""
        with self._lock:
            if self.closed or self.failed is not None:
                return None
            closed = list(self._segments[:-1])
            lso = self.last_stable_offset
            aborted: list[AbortedTxn] = []
            for segment in self._aborted_segment_list():
                aborted.extend(t for t in segment.txn_index.entries() if t.first_offset < lso)
            return CleanView(
                segments=closed,
                largest_timestamps=[s.largest_timestamp() for s in closed],
                first_timestamps=[s.first_batch_timestamp() for s in closed],
                log_start_offset=self.log_start_offset,
                log_end_offset=self.log_end_offset,
                active_base=self._segments[-1].base_offset,
                first_unstable_offset=lso,
                producer_last={
                    pid: e.batches[-1].last_offset
                    for pid, e in self.producer_state.entries.items()
                    if e.batches
                },
                producer_marker_epoch={
                    pid: e.epoch
                    for pid, e in self.producer_state.entries.items()
                    if not e.batches and e.epoch >= 0
                },
                aborted=sorted(aborted, key=lambda t: t.first_offset),
                generation=self.generation,
                config=self.config,
            )

    def dup_segment_fds(self, segments: list[LogSegment]) -> list[int] | None:
        """Private fds of the segments' `.log` files (caller closes), None if the log closed."""
        with self._lock:
            if self.closed:
                return None
            files = [s.open_file() for s in segments]  # held until dup'd: dropping one closes it
            return [disk.dup(f.fd) for f in files]

    def replace_segments(self, old: list[LogSegment], base: int | None, generation: int) -> bool:
        """Swap `old` (consecutive closed segments) for the published swap at `base` (None: the
        cleaned output was empty, just delete them); False (swap discarded) if `old` moved."""
        with self._lock:
            segments = self._segments
            start = _position(segments, old)
            if (
                self.closed
                or self.failed is not None
                or generation != self.generation
                or start is None
                or start + len(old) >= len(segments)
            ):
                if base is not None:
                    discard(self.directory, base)
                return False
            self._aborted_segments = None
            try:
                fresh = segments[:start] + segments[start + len(old) :]
                for segment in old:
                    segment.delete()
                if base is not None:
                    install(self.directory, base)
                    cleaned = LogSegment(
                        self.directory,
                        base,
                        index_interval_bytes=self.config.index_interval_bytes,
                        max_index_bytes=self.config.segment_index_bytes,
                        now_ms=self.clock(),
                        active=False,
                    )
                    cleaned.load_tail()
                    cleaned.write_indexes()
                    fresh.insert(start, cleaned)
            except OSError as exc:
                self.failed = f"segment swap failed: {exc}"
                log.error("%s: %s; recovered on the next start", self.name, self.failed)
                raise KafkaStorageError(f"{self.name}: {self.failed}") from exc
            self._segments = fresh
        fsync_dir(self.directory, missing_ok=True)  # renamed meanwhile for deletion
        return True

    # --- configuration and introspection ---------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            active = self._segments[-1]
            active.set_index_limits(config.index_interval_bytes, config.segment_index_bytes)
            active.roll_jitter_ms = config.random_jitter(self._rng)
        self._want_flush()  # a new flush policy may already be due

    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path)
            for s in self._segments
        ]

    def producers(self) -> list[ProducerInfo]:
        return self.producer_state.infos()

    def expire_producers(self, now_ms: int, max_age_ms: int) -> int:
        """producer.id.expiration.ms: forget idle producers without open transactions."""
        with self._lock:
            return self.producer_state.expire(now_ms, max_age_ms)


def _position(segments: list[LogSegment], old: list[LogSegment]) -> int | None:
    """Where `old` sits in `segments` as a run of the very same objects, if it does."""
    for i, segment in enumerate(segments):
        if segment is old[0]:
            run = segments[i : i + len(old)]
            if len(run) == len(old) and all(a is b for a, b in zip(run, old, strict=True)):
                return i
            return None
    return None


def _end_txn_marker(
    buf: bytearray, pos: int, header: BatchHeader, *, strict: bool
) -> EndTxnMarker | None:
    """The commit/abort marker of a control batch (None for data batches and for a control
    batch without records). `strict` (the leader's own appends): a control batch whose
    record is not a marker is INVALID_RECORD; a follower takes its leader's bytes as they are."""
    if not header.is_control or header.record_count == 0:
        return None
    marker = read_marker(memoryview(buf)[pos : pos + header.size], header)
    if marker is None and strict:
        raise LogAppendError(
            ErrorCode.INVALID_RECORD, "bad control batch: not a transaction marker"
        )
    return marker


__all__ = [
    "AppendOrigin",
    "AppendResult",
    "KafkaStorageError",
    "LogAppendError",
    "OffsetOutOfRange",
    "PartitionLog",
    "ReadResult",
    "SegmentInfo",
]
