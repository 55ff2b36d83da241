"""Segment lifecycle: rolling, and removing data from either end of the log.

Head: DeleteRecords and retention advance the log start offset, then delete
every segment wholly below it (rolling first if that includes the active one).
Tail: `truncate_to` (replication) drops everything from an offset on. Both keep
the epoch history and producer state in step. `PartitionLog` inherits these;
callers hold no lock, each method takes the log's lock itself.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from pathlib import Path

from broker.log.errors import OffsetOutOfRange
from broker.log.loader import iter_headers_from, new_segment
from broker.log.queries import LogQueries
from broker.log.segment import LogSegment

log = logging.getLogger(__name__)


class SegmentLifecycle(LogQueries):
    """Rolling and trimming; see the module docstring."""

    clock: Callable[[], int]
    flush_requested: bool
    _rng: random.Random
    _pending_snapshots: list[Path]

    def _roll(self, now_ms: int) -> None:
        """Start a new active segment at the log end; snapshot producers there (OSError propagates)."""
        old = self._segments[-1]
        old.seal()
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
        log.debug("%s: rolled segment at %d", self.directory.name, segment.base_offset)

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
                    if segment.size == 0 or now_ms - _age_ts(segment) <= self.config.retention_ms:
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
            self.epochs.save()
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
            if offset < self.log_start_offset:
                self._restart_at(offset)
                return
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._segments.pop().delete()
            self._segments[-1].truncate_to(offset)
            active = self._segments[-1]
            active.set_index_limits(
                self.config.index_interval_bytes, self.config.segment_index_bytes
            )
            end = self.log_end_offset
            self.log_start_offset = min(self.log_start_offset, end)
            if self.epochs.truncate_from_end(end):
                self.epochs.save()
            self._rebuild_producers(end)
            self.recovery_point = min(self.recovery_point, end)
            self.high_watermark = min(self.high_watermark, end)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Discard the whole log and continue, empty, from `offset`."""
        with self._lock:
            self._restart_at(offset)

    def _restart_at(self, offset: int) -> None:
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


def _age_ts(segment: LogSegment) -> int:
    """The timestamp retention.ms measures from: largest record timestamp, else file mtime."""
    if segment.max_timestamp >= 0:
        return segment.max_timestamp
    return os.fstat(segment.file.fd).st_mtime_ns // 1_000_000
