"""The partition log's side of compaction: a consistent view to plan from, and the swap.

The cleaner works in its own thread on closed segments, which never change
once rolled, so it reads them without the log's lock (through fds it opened
under the lock, so a concurrent delete or close cannot pull a file from under
it). Only `replace_segments` changes the log, under the lock: it checks that
the segments it cleaned are still exactly where they were (retention,
DeleteRecords, truncation or deletion may have removed or changed them
meanwhile; then the attempt is dropped), deletes them, installs the cleaned
segment (broker.log.swap) and publishes a *new* segment list, so readers
holding the old list keep a coherent picture. Readers take the same lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from strom.storage.checkpoint import fsync_dir
from strom.storage.config import LogConfig
from strom.storage.errors import KafkaStorageError
from strom.storage.queries import LogQueries
from strom.storage.segment import LogSegment
from strom.storage.swap import discard, install

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanView:
    """What the cleaner plans a pass from, taken under the log's lock."""

    segments: list[LogSegment]
    """Closed segments, oldest first (never the active one)."""
    largest_timestamps: list[int]
    """Per closed segment: its largest record timestamp, else its file's mtime."""
    first_timestamps: list[int]
    """Per closed segment: its first batch's max timestamp (-1 if none)."""
    log_start_offset: int
    log_end_offset: int
    active_base: int
    first_unstable_offset: int
    """The first offset of an open transaction, else the log end: never cleaned past."""
    producer_last: dict[int, int]
    """Producer id -> last offset of its newest batch (kept even when emptied)."""
    generation: int
    config: LogConfig


class SegmentReplacement(LogQueries):
    """Cleaner support mixed into PartitionLog; see the module docstring."""

    clock: Callable[[], int]
    closed: bool
    failed: str | None
    generation: int
    """Bumped by truncation: a pass planned before it must not commit."""
    clean_offset: int | None
    """The cleaner's checkpoint: everything below was cleaned (None: never cleaned)."""
    tombstone_horizon_ms: int | None
    """The earliest delete horizon of tombstones left by the last pass (in memory only)."""

    def clean_view(self) -> CleanView | None:
        """A snapshot for planning, or None when the log is closed or failed."""
        with self._lock:
            if self.closed or self.failed is not None:
                return None
            closed = list(self._segments[:-1])
            open_txns = [
                e.current_txn_first_offset
                for e in self.producer_state.entries.values()
                if e.current_txn_first_offset >= 0
            ]
            return CleanView(
                segments=closed,
                largest_timestamps=[largest_timestamp(s) for s in closed],
                first_timestamps=[s.first_batch_timestamp() for s in closed],
                log_start_offset=self.log_start_offset,
                log_end_offset=self.log_end_offset,
                active_base=self._segments[-1].base_offset,
                first_unstable_offset=min(open_txns, default=self.log_end_offset),
                producer_last={
                    pid: e.batches[-1].last_offset
                    for pid, e in self.producer_state.entries.items()
                    if e.batches
                },
                generation=self.generation,
                config=self.config,
            )

    def dup_segment_fds(self, segments: list[LogSegment]) -> list[int] | None:
        """Private fds of the segments' `.log` files (caller closes), None if the log closed."""
        with self._lock:
            if self.closed:
                return None
            files = [s.open_file() for s in segments]  # held until dup'd: dropping one closes it
            return [os.dup(f.fd) for f in files]

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
        fsync_dir(self.directory)
        return True


def _position(segments: list[LogSegment], old: list[LogSegment]) -> int | None:
    """Where `old` sits in `segments` as a run of the very same objects, if it does."""
    for i, segment in enumerate(segments):
        if segment is old[0]:
            run = segments[i : i + len(old)]
            if len(run) == len(old) and all(a is b for a, b in zip(run, old, strict=True)):
                return i
            return None
    return None


def largest_timestamp(segment: LogSegment) -> int:
    """What retention.ms and min.compaction.lag.ms age a segment by (Kafka's largestTimestamp)."""
    if segment.max_timestamp >= 0:
        return segment.max_timestamp
    return os.stat(segment.path).st_mtime_ns // 1_000_000
