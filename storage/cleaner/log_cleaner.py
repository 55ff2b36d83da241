"""The log cleaner: compacts `cleanup.policy=compact` logs in a background thread.

Kafka's LogCleaner and LogCleanerManager in one: a plain `threading.Thread`
(so cleaning never runs on, or waits for, the trio event loop) repeatedly
picks the filthiest compacted log and runs a `CleaningPass` on it, or sleeps
`log.cleaner.backoff.ms` when none needs cleaning.

A log is cleanable when, over its closed segments,

- dirty bytes (from the cleaner checkpoint up to the first uncleanable offset)
  / all bytes up to there > `min.cleanable.dirty.ratio`, or
- some dirty segment's first batch is older than `max.compaction.lag.ms`
  (Kafka's "compaction now"), or
- (Strom, beyond Kafka) the earliest delete horizon the last pass left behind
  has passed, so expired tombstones go without waiting for new writes.

The first uncleanable offset is the smallest of: the active segment's base,
the first offset of an open transaction, and the base of the first dirty
segment whose largest timestamp is within `min.compaction.lag.ms` of now.
Among cleanable logs the one with the highest dirty ratio goes first. A log
whose pass fails unexpectedly (a corrupt batch, a disk error) is skipped until
restart, as Kafka marks partitions uncleanable.

Per data directory, `cleaner-offset-checkpoint` (Kafka's text checkpoint,
`topic partition offset`) holds each log's first dirty offset; it is written
atomically after every pass (strom.storage.log.log_manager), and a missing, stale (past
the log end, or below the log start) or corrupt entry only means the next
pass treats more of the log as dirty.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.storage.cleaner.offset_map import OffsetMap
from strom.storage.log.partition import PartitionLog
from strom.storage.log_errors import LogError

if TYPE_CHECKING:
    from strom.config import BrokerConfig
    from strom.storage.cleaner.cleaner_pass import PassResult
    from strom.storage.log.clean_view import CleanView
    from strom.storage.log.log_manager import LogManager

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerSettings:
    """The broker's log.cleaner.* settings."""

    enabled: bool = True
    dedupe_buffer_size: int = 134217728
    io_buffer_size: int = 524288
    load_factor: float = 0.9
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000

    @classmethod
    def of(cls, config: BrokerConfig) -> CleanerSettings:
        """From the broker's effective config; log.cleaner.threads=0 disables cleaning."""
        return cls(
            enabled=config.log_cleaner_enable and config.log_cleaner_threads > 0,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            io_buffer_size=config.log_cleaner_io_buffer_size,
            load_factor=config.log_cleaner_io_buffer_load_factor,
            max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
            backoff_ms=config.log_cleaner_backoff_ms,
        )


@dataclass(frozen=True)
class Assessment:
    """How dirty one log is, and the section a pass would map."""

    log: PartitionLog
    view: CleanView
    first_dirty: int
    first_uncleanable: int
    dirty_bytes: int
    ratio: float
    overdue_ms: int
    """How far past max.compaction.lag.ms its oldest dirty data is (0: not overdue)."""
    horizon_due: bool

    @property
    def cleanable(self) -> bool:
        if self.dirty_bytes > 0 and (
            self.ratio > self.view.config.min_cleanable_dirty_ratio or self.overdue_ms > 0
        ):
            return True
        return self.horizon_due


def assess(partition: PartitionLog, now_ms: int) -> Assessment | None:
    """The cleaner's view of one compacted log (None: not compacted, closed or failed)."""
    view = partition.clean_view()
    if view is None or not view.config.compact:
        return None
    config = view.config
    checkpoint = partition.clean_offset
    first_dirty = view.log_start_offset
    if checkpoint is not None and view.log_start_offset <= checkpoint <= view.log_end_offset:
        first_dirty = checkpoint
    uncleanable = min(view.active_base, view.first_unstable_offset)
    if config.min_compaction_lag_ms > 0:
        for segment, largest in zip(view.segments, view.largest_timestamps, strict=True):
            if (
                segment.next_offset > first_dirty
                and largest > now_ms - config.min_compaction_lag_ms
            ):
                uncleanable = min(uncleanable, segment.base_offset)
                break
    uncleanable = max(uncleanable, first_dirty)
    clean_bytes = dirty_bytes = 0
    earliest: int | None = None
    for segment, first_ts in zip(view.segments, view.first_timestamps, strict=True):
        if segment.next_offset <= first_dirty:
            clean_bytes += segment.size
        elif segment.base_offset < uncleanable:
            dirty_bytes += segment.size
            if first_ts > 0:
                earliest = first_ts if earliest is None else min(earliest, first_ts)
    total = clean_bytes + dirty_bytes
    overdue = 0
    if earliest is not None and config.max_compaction_lag_ms > 0:
        overdue = max(0, now_ms - config.max_compaction_lag_ms - earliest)
    horizon = partition.tombstone_horizon_ms
    return Assessment(
        partition,
        view,
        first_dirty,
        uncleanable,
        dirty_bytes,
        dirty_bytes / total if total else 0.0,
        overdue,
        horizon is not None and now_ms >= horizon and clean_bytes > 0,
    )


class LogCleaner:
    """The cleaner thread and its choice of log; see the module docstring."""

    def __init__(
        self, logs: LogManager, settings: CleanerSettings, clock: Callable[[], int]
    ) -> None:
        self.logs = logs
        self.settings = settings
        self.clock = clock
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._uncleanable: weakref.WeakSet[PartitionLog] = weakref.WeakSet()
        self.passes = 0
        self.last_result: PassResult | None = None

    # --- thread ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None and self.settings.enabled:
            self._thread = threading.Thread(target=self._run, name="strom-log-cleaner", daemon=True)
            self._thread.start()

    def reconfigure(self, settings: CleanerSettings) -> None:
        """Run with `settings` from the next pass on (dynamic log.cleaner.* changes): started
        if they enable cleaning, idle while they disable it."""
        self.settings = settings
        self.start()
        self.wake()

    def wake(self) -> None:
        """Look for work now instead of at the end of the backoff."""
        self._wake.set()

    def shutdown(self) -> None:
        """Stop the thread, abandoning a pass in progress (its `.cleaned` files are removed)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.settings.enabled and self.clean_once()
            except Exception:  # keep cleaning other logs; this one was marked uncleanable
                log.exception("log cleaner pass failed")
                cleaned = False
            if not cleaned:
                self._wake.wait(self.settings.backoff_ms / 1000)
                self._wake.clear()

    # --- choosing and cleaning ---------------------------------------------------------------

    def filthiest(self, now_ms: int) -> Assessment | None:
        best: Assessment | None = None
        for partition in self.logs.partitions():
            if partition in self._uncleanable:
                continue
            found = assess(partition, now_ms)
            if found is not None and found.cleanable and (best is None or found.ratio > best.ratio):
                best = found
        return best

    def clean_once(self) -> bool:
        """Clean the filthiest log, if any is cleanable; whether one was."""
        now = self.clock()
        found = self.filthiest(now)
        if found is None:
            return False
        self.clean(found, now)
        return True

    def clean(self, found: Assessment, now_ms: int) -> PassResult | None:
        """Run one pass over an assessed log and record its outcome (None: abandoned)."""
        # Imported on the first pass: a large import most brokers, compacting nothing, never need.
        from strom.storage.cleaner.cleaner_pass import CleaningAborted, CleaningPass

        partition = found.log
        offsets = OffsetMap(self.settings.dedupe_buffer_size, self.settings.load_factor)
        cleaning = CleaningPass(
            partition,
            found.view,
            found.first_dirty,
            found.first_uncleanable,
            offsets,
            now_ms,
            io_buffer=self.settings.io_buffer_size,
            max_bytes_per_second=self.settings.max_io_bytes_per_second,
            stop=self._stop,
        )
        try:
            result = cleaning.run()
        except CleaningAborted as why:
            log.info("%s: cleaning abandoned: %s", partition.name, why)
            return None
        except (LogError, OSError) as exc:
            self._uncleanable.add(partition)
            log.error("%s: marked uncleanable until restart: %s", partition.name, exc)
            return None
        if partition.generation == found.view.generation and not partition.closed:
            partition.clean_offset = result.map_end
            partition.tombstone_horizon_ms = result.horizon
            self.logs.checkpoint_cleaner(partition)
        self.passes += 1
        self.last_result = result
        stats = result.stats
        elapsed = max(stats.elapsed, 1e-9)
        log.info(
            "%s: cleaned to offset %d: read %.1f MB, wrote %.1f MB, %d of %d batches kept,"
            " %d segment groups replaced, %.3fs (%.1f MB/s)",
            partition.name,
            result.map_end,
            stats.bytes_read / 1e6,
            stats.bytes_written / 1e6,
            stats.batches_written,
            stats.batches_read,
            stats.groups_replaced,
            elapsed,
            stats.bytes_read / 1e6 / elapsed,
        )
        return result
