"""Segment lifecycle: rolling, flushing, closing, and removing data from either end.

Flush: `flush()` runs in a worker thread; it holds the lock only to write out
pending index entries and take fds of segments with unflushed data, and to
publish the new recovery point. A roll writes the old segment's index entries
(no fsync: the flush it requests does that) and lets its `.log` fd go.

Head: DeleteRecords and retention advance the log start offset, then delete
every segment wholly below it, oldest first (rolling first if that includes
the active one, as Kafka does, so what is deleted is never the active segment).
Retention (Kafka's rules): from the oldest segment on, while its largest
timestamp is more than retention.ms old, or while dropping it still leaves at
least retention.bytes; compact-only logs are exempt.
Tail: `truncate_to` (replication) drops everything from an offset on. Both keep
the epoch history and producer state in step. `PartitionLog` inherits these;
callers hold no lock, each method takes the log's lock itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Callable
from pathlib import Path

from strom.storage.checkpoint import fsync_dir
from strom.storage.errors import KafkaStorageError, OffsetOutOfRange
from strom.storage.loader import iter_headers_from, new_segment
from strom.storage.queries import LogQueries
from strom.storage.replace import largest_timestamp

log = logging.getLogger(__name__)


class SegmentLifecycle(LogQueries):
    """Rolling, flushing, closing and trimming; see the module docstring."""

    clock: Callable[[], int]
    flush_requested: bool
    parent_unsynced: bool
    on_flush_wanted: Callable[[], None] | None
    last_flush_ms: int
    failed: str | None
    closed: bool
    _rng: random.Random
    _pending_snapshots: list[Path]
    generation: int

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
                os.fsync(fd)
            for path in snapshots:
                with contextlib.suppress(FileNotFoundError):
                    _fsync_path(path)
            fsync_dir(self.directory)
            if self.parent_unsynced:
                fsync_dir(self.directory.parent)
                self.parent_unsynced = False
        except OSError as exc:
            with self._lock:
                self.failed = f"flush failed: {exc}"
            raise KafkaStorageError(f"{self.name}: flush failed: {exc}") from exc
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            self.recovery_point = max(self.recovery_point, target)
            self.last_flush_ms = self.clock()
            self.flush_requested = False

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

    # --- head -------------------------------------------------------------------------------

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
                    age = now_ms - largest_timestamp(segment)
                    if segment.size == 0 or age <= self.config.retention_ms:
                        break
                    count += 1
            if self.config.retention_bytes >= 0:
                excess = sum(s.size for s in segments[count:]) - self.config.retention_bytes
                while count < len(segments) and 0 < segments[count].size <= excess:
                    excess -= segments[count].size
                    count += 1
            if count:
                end = segments[count].base_offset if count < len(segments) else self.log_end_offset
                self._advance_start(max(end, self.log_start_offset), now_ms)
            return count

    def _advance_start(self, offset: int, now_ms: int) -> None:
        """Move the log start (lock held) and delete the segments wholly below it."""
        self.log_start_offset = offset
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

    # --- tail -------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after `offset` (a batch straddling it goes too)."""
        with self._lock:
            if offset >= self.log_end_offset:
                return
            self.generation += 1
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
        self.log_start_offset = self.recovery_point = self.high_watermark = offset
        self.epochs.entries = []
        self.epochs.save()
        self.producer_state.entries = {}
        self.producer_state.delete_snapshots(below=2**63)

    def _rebuild_producers(self, end: int) -> None:
        """Producer state as of `end`: newest snapshot at or below it, plus replay."""
        self.producer_state.delete_snapshots(above=end)
        snapshot = self.producer_state.load_latest_snapshot(end)
        start = max(snapshot or 0, self._segments[0].base_offset)
        for header in iter_headers_from(self._segments, start):
            if header.base_offset >= start:
                self.producer_state.replay(header)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
