"""One cleaning pass over one compacted log (runs in the cleaner's thread, never the loop's).

1. Map: every keyed record of the dirty section [first dirty, first uncleanable)
   goes into the OffsetMap (key -> latest offset). When the map's memory budget
   runs out mid-segment the section ends at the last whole segment mapped (or,
   if not even the first dirty segment fits, at the last whole batch mapped).
2. Group: the closed segments below the mapped end are grouped, oldest first,
   into runs that fit one segment (segment.bytes, index capacity, an int32 of
   relative offsets).
3. Rewrite each group into `<base>.log.cleaned` with strom.storage.cleaner.compact_batch's
   rule, the map covering the whole log from its start (so the clean section
   also loses what newer dirty records supersede) up to the mapped end (past
   it, in a segment the map stopped inside, batches are copied unchanged: a
   tombstone there was never mapped, so it must not start its delete.retention.ms
   clock, or expire before the records it deletes are gone), then fsync, publish the
   swap and let the log replace the group (`PartitionLog.replace_segments`,
   strom.storage.log.swap).
   A group that loses nothing is left alone; one that loses everything is
   deleted. Groups go oldest first, so a crash between them is harmless.

Transactions (strom.storage.cleaner.cleaned_txns): both walks follow the transactions
they meet; data of aborted transactions never enters the map and is removed by the
rewrite whatever its keys; markers stay while their transaction's data does, then get a
delete horizon like tombstones and go at it; the aborted transactions whose markers stay
are written to the cleaned segment's `.txnindex`.

The pass returns the mapped end (the log's next first dirty offset, Kafka's
cleaner-offset-checkpoint entry) and the earliest delete horizon it left (tombstones'
and markers').
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from strom.storage import disk
from strom.storage.cleaner.cleaned_txns import CleanedTransactions
from strom.storage.cleaner.compact_batch import (
    KEY,
    OFFSET,
    Filtered,
    batch_records,
    empty_batch,
    filter_batch,
    rebuild,
)
from strom.storage.cleaner.offset_map import OffsetMap
from strom.storage.fileio import read_batches
from strom.storage.log.clean_view import CleanView
from strom.storage.log.log_loader import read_marker
from strom.storage.log.partition import PartitionLog
from strom.storage.log.segment import INT32_MAX, LogSegment
from strom.storage.log.swap import CLEANED, discard, publish
from strom.storage.log_errors import LogError
from strom.wire.errors import ErrorCode
from strom.wire.records import BatchHeader

YIELD_EVERY = 0.001
"""Seconds of cleaning between GIL hand-offs to the event loop's thread."""


class CleaningAborted(Exception):
    """The cleaner is stopping or the log went away; nothing was changed."""


@dataclass
class PassStats:
    map_bytes_read: int = 0
    """Bytes of the dirty section read to build the offset map."""
    bytes_read: int = 0
    """Bytes of the segments rewritten (the log processed, as Kafka reports it)."""
    bytes_written: int = 0
    batches_read: int = 0
    batches_written: int = 0
    records_kept: int = 0
    groups_replaced: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass
class PassResult:
    map_end: int
    horizon: int | None
    stats: PassStats


class CleaningPass:
    """Clean `view`'s log between `first_dirty` and `upper`; see the module docstring."""

    def __init__(
        self,
        log: PartitionLog,
        view: CleanView,
        first_dirty: int,
        upper: int,
        offsets: OffsetMap,
        now_ms: int,
        *,
        io_buffer: int = 1 << 20,
        max_bytes_per_second: float = float("inf"),
        stop: threading.Event | None = None,
    ) -> None:
        self.log, self.view, self.offsets, self.now_ms = log, view, offsets, now_ms
        self.first_dirty, self.upper = first_dirty, upper
        self.io_buffer = max(io_buffer, 4096)
        self.rate = max_bytes_per_second
        self.throttled = 0 < max_bytes_per_second < float("inf")
        self._next_yield = 0.0
        self.stop = stop or threading.Event()
        self.stats = PassStats()
        self.horizon: int | None = None
        self.txns = CleanedTransactions(view.aborted)
        """The rewrite's walk over transactions, from the log's start."""
        self._map_txns = CleanedTransactions(
            [t for t in view.aborted if t.last_offset >= first_dirty]
        )
        """The map's walk, from the first dirty offset: aborted transactions reaching it."""

    def run(self) -> PassResult:
        segments = self.view.segments
        fds = self.log.dup_segment_fds(segments)
        if fds is None:
            raise CleaningAborted(f"{self.log.name} is closed")
        try:
            map_end = self._build_map(segments, fds)
            candidates = [
                (s, fd) for s, fd in zip(segments, fds, strict=True) if s.base_offset < map_end
            ]
            for group in self._groups(candidates):
                self._clean_group(group, map_end)
        finally:
            for fd in fds:
                disk.close(fd)
        return PassResult(map_end, self.horizon, self.stats)

    # --- 1. the offset map -------------------------------------------------------------------

    def _build_map(self, segments: list[LogSegment], fds: list[int]) -> int:
        """Fill the map from the dirty section; the offset it is complete up to."""
        end = self.first_dirty
        for segment, fd in zip(segments, fds, strict=True):
            if segment.next_offset <= self.first_dirty:
                continue
            if segment.base_offset >= self.upper:
                break
            full_at = self._map_segment(segment, fd)
            if full_at is None:
                end = min(segment.next_offset, self.upper)
                continue
            if end == self.first_dirty:  # not even the first dirty segment fits: stop mid-way
                end = full_at
            if end <= self.first_dirty:
                raise LogError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"{self.log.name}: log.cleaner.dedupe.buffer.size is too small for one batch",
                )
            break
        return end

    def _map_segment(self, segment: LogSegment, fd: int) -> int | None:
        """Map one segment's dirty batches; None when done, else where the map filled up."""
        offsets = self.offsets
        put = offsets.put
        mapped = self.first_dirty
        txns = self._map_txns
        for header, batch in read_batches(fd, 0, segment.size, self.io_buffer):
            if header.base_offset >= self.upper:
                return None
            self.stats.map_bytes_read += header.size
            self._throttle()
            if header.last_offset < self.first_dirty:
                mapped = header.next_offset
                continue
            if header.is_control:
                txns.on_marker(header, read_marker(batch, header))
                mapped = header.next_offset
                continue
            if txns.on_data(header):  # an aborted transaction's keys never count
                mapped = header.next_offset
                continue
            if not offsets.room_for(header.record_count):
                return mapped
            for record in batch_records(batch, header)[1]:
                key = record[KEY]
                if key is not None:
                    put(key, record[OFFSET])
            mapped = header.next_offset
        return None

    # --- 2. groups ---------------------------------------------------------------------------

    def _groups(
        self, candidates: list[tuple[LogSegment, int]]
    ) -> list[list[tuple[LogSegment, int]]]:
        config = self.view.config
        max_entries = config.segment_index_bytes // 12
        groups: list[list[tuple[LogSegment, int]]] = []
        for segment, fd in candidates:
            if groups:
                group = groups[-1]
                size = sum(s.size for s, _ in group) + segment.size
                entries = (
                    sum(s.offset_index.entries for s, _ in group) + segment.offset_index.entries
                )
                span = segment.next_offset - 1 - group[0][0].base_offset
                if size <= config.segment_bytes and entries < max_entries and span <= INT32_MAX:
                    group.append((segment, fd))
                    continue
            groups.append([(segment, fd)])
        return groups

    # --- 3. rewrite and swap -----------------------------------------------------------------

    def _clean_group(self, group: list[tuple[LogSegment, int]], map_end: int) -> None:
        config, directory = self.view.config, self.log.directory
        base = group[0][0].base_offset
        discard(directory, base)
        out = LogSegment(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            now_ms=self.now_ms,
            suffix=CLEANED,
        )
        try:
            changed = self._rewrite(group, out, map_end)
            if changed and out.size:
                out.seal()
                for fd in out.sync_fds():
                    try:
                        disk.fsync(fd)
                    finally:
                        disk.close(fd)
        except Exception:  # not BaseException: a simulated kill must leave its files behind
            out.close()
            discard(directory, base)
            raise
        out.close()
        if not changed:
            discard(directory, base)
            return
        if out.size:
            publish(directory, base)
        else:
            discard(directory, base)
        segments = [s for s, _ in group]
        if self.log.replace_segments(segments, base if out.size else None, self.view.generation):
            self.stats.groups_replaced += 1

    def _rewrite(self, group: list[tuple[LogSegment, int]], out: LogSegment, map_end: int) -> bool:
        """Filter the group's batches into `out`; batches at or past `map_end` (the tail of a
        segment the map stopped inside) are copied as they are: their tombstones were never
        mapped, so they must not get a delete horizon, let alone be dropped."""
        drm = self.view.config.delete_retention_ms
        last = self.view.producer_last
        txns = self.txns
        txns.kept_aborted = []
        pending = bytearray()
        batches: list[tuple[int, BatchHeader]] = []
        changed = False
        for segment, fd in group:
            for header, batch in read_batches(fd, 0, segment.size, self.io_buffer):
                if self.stop.is_set():
                    raise CleaningAborted("the cleaner is stopping")
                self.stats.bytes_read += header.size
                self.stats.batches_read += 1
                self._throttle()
                producer_last = (
                    header.has_producer_id and last.get(header.producer_id) == header.last_offset
                )
                if header.is_control:
                    result = self._filter_marker(batch, header)
                elif txns.on_data(header):  # an aborted transaction's batch
                    result = Filtered(empty_batch(header) if producer_last else None, True, None, 0)
                elif header.base_offset >= map_end:
                    result = Filtered(batch, False, None, header.record_count)
                else:
                    result = filter_batch(
                        batch, header, self.offsets, self.now_ms, drm, producer_last
                    )
                changed = changed or result.changed
                if result.horizon is not None:
                    self.horizon = (
                        result.horizon
                        if self.horizon is None
                        else min(self.horizon, result.horizon)
                    )
                if result.data is None:
                    continue
                self.stats.records_kept += result.records_kept
                kept = header if result.data is batch else BatchHeader.parse(result.data)
                batches.append((len(pending), kept))
                pending += result.data
                if len(pending) >= self.io_buffer:
                    self._write(out, pending, batches)
                    pending, batches = bytearray(), []
        if pending:
            self._write(out, pending, batches)
        for txn in txns.kept_aborted:
            out.txn_index.append(txn)
        return changed

    def _filter_marker(self, batch: memoryview, header: BatchHeader) -> Filtered:
        """A control batch, by the transaction rules (strom.storage.cleaner.cleaned_txns): kept
        while its transaction's data is; then it gets a delete horizon and goes at it (kept
        empty if it is its producer's newest entry)."""
        marker = read_marker(batch, header) if header.record_count else None
        if not self.txns.on_marker(header, marker):
            return Filtered(batch, False, None, header.record_count)
        pid = header.producer_id
        newest = (
            pid not in self.view.producer_last
            and self.view.producer_marker_epoch.get(pid) == header.producer_epoch
        )
        if marker is None or (header.has_delete_horizon and self.now_ms >= header.base_timestamp):
            if newest:
                emptied = empty_batch(header)
                return Filtered(emptied, bytes(emptied) != bytes(batch), None, 0)
            return Filtered(None, True, None, 0)
        if header.has_delete_horizon:
            return Filtered(batch, False, header.base_timestamp, header.record_count)
        horizon = self.now_ms + self.view.config.delete_retention_ms
        payload, scanned = batch_records(batch, header)
        return Filtered(rebuild(header, payload, scanned, horizon), True, horizon, len(scanned))

    def _write(
        self, out: LogSegment, data: bytearray, batches: list[tuple[int, BatchHeader]]
    ) -> None:
        out.append(memoryview(data), batches)
        self.stats.bytes_written += len(data)
        self.stats.batches_written += len(batches)

    def _throttle(self) -> None:
        """Hold reads to log.cleaner.io.max.bytes.per.second, and let the event loop's thread
        have the GIL every millisecond or so (rather than after the 5 ms switch interval)."""
        now = time.perf_counter()
        if now >= self._next_yield:
            time.sleep(0)
            self._next_yield = time.perf_counter() + YIELD_EVERY
        if not self.throttled:
            return
        done = self.stats.bytes_read + self.stats.map_bytes_read
        ahead = done / self.rate - self.stats.elapsed
        if ahead > 0.01 and self.stop.wait(ahead):
            raise CleaningAborted("the cleaner is stopping")
