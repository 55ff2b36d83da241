"""One log segment: `<20-digit base offset>.log` plus its `.index` and `.timeindex`.

The `.log` file is nothing but whole RecordBatch v2 batches back to back, exactly
as they travel on the wire (see `wire.records.batch` for the 61-byte header), in
increasing offset order; the file name is the segment's base offset, so every
offset in it is >= the name and the next segment's name is > its last offset.

The cleaner builds a replacement segment under the same names plus a suffix
(`<base>.log.cleaned`, ...; see broker.log.swap for how it goes live).

Crash recovery: the file may end in a torn batch or hold garbage after a power
loss. `recover()` walks it from the start, checks framing, magic, CRC-32C and
that offsets only go forward, truncates the file at the first bad batch and
rewrites both indexes from what it kept. Without recovery (clean shutdown,
below the recovery point) only a short tail is scanned to find the end offset.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from broker.log.fileio import SegmentFile, ValidatingScan, scan_headers, write_all
from broker.log.index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from wire.errors import ProtocolError
from wire.records import BatchHeader, TimestampType, decode_batch

INT32_MAX = 2**31 - 1
LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"

Found = tuple[int, int, int]
"""(offset, timestamp, leader_epoch) answered by timestamp queries."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment:
    """A `.log` file and its indexes; tracks size, end offset and max timestamp in memory."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        roll_jitter_ms: int = 0,
        suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        stem = segment_name(base_offset)
        self.file = SegmentFile(
            directory / f"{stem}{LOG_SUFFIX}{suffix}", os.O_RDWR | os.O_CREAT | os.O_APPEND
        )
        self.offset_index = OffsetIndex(
            directory / f"{stem}{INDEX_SUFFIX}{suffix}", base_offset, max_index_bytes
        )
        self.time_index = TimeIndex(
            directory / f"{stem}{TIME_INDEX_SUFFIX}{suffix}", base_offset, max_index_bytes
        )
        self.index_interval_bytes = index_interval_bytes
        self.size = os.fstat(self.file.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index = 0
        self.created_ms = now_ms
        self.roll_jitter_ms = roll_jitter_ms
        self._first_batch_timestamp: int | None = None

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def empty(self) -> bool:
        return self.size == 0

    def set_index_limits(self, index_interval_bytes: int, max_index_bytes: int) -> None:
        self.index_interval_bytes = index_interval_bytes
        self.offset_index.max_entries = max_index_bytes // OffsetIndex.ENTRY.size
        self.time_index.max_entries = max_index_bytes // TimeIndex.ENTRY.size

    # --- writing ---------------------------------------------------------------------------

    def append(self, data: memoryview, batches: list[tuple[int, BatchHeader]]) -> None:
        """Write batches (positions relative to `data`) as one write, then their index entries.

        On OSError both files are truncated back and nothing in memory changes.
        """
        start = self.size
        offsets: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        since, max_ts, max_off = (
            self.bytes_since_index,
            self.max_timestamp,
            self.offset_of_max_timestamp,
        )
        last_ts = self._last_time_entry()
        for pos, header in batches:
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
            if since > self.index_interval_bytes:
                offsets.append((header.last_offset, start + pos))
                if max_ts > last_ts:
                    times.append((max_ts, max_off))
                    last_ts = max_ts
                since = 0
            since += header.size
        old_offsets, old_times = self.offset_index.entries, self.time_index.entries
        try:
            write_all(self.file.fd, data)
            self.offset_index.append(offsets)
            self.time_index.append(times)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self.file.fd, start)
            with contextlib.suppress(OSError):
                self.offset_index.keep(old_offsets)
            with contextlib.suppress(OSError):
                self.time_index.keep(old_times)
            raise
        if self.size == 0:
            self._first_batch_timestamp = batches[0][1].max_timestamp
        self.size = start + len(data)
        self.next_offset = batches[-1][1].next_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
        self.bytes_since_index = since

    def _last_time_entry(self) -> int:
        last = self.time_index.last()
        return NO_TIMESTAMP if last is None else last[0]

    def seal(self) -> None:
        """Record the final max timestamp in the time index (on roll and close) so it survives."""
        if self.max_timestamp > self._last_time_entry():
            self.time_index.append([(self.max_timestamp, self.offset_of_max_timestamp)])

    def should_roll(
        self,
        size: int,
        max_ts: int,
        last_offset: int,
        segment_bytes: int,
        segment_ms: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll rule for an append of `size` bytes ending at `last_offset`."""
        if self.size == 0:
            return False
        if self.size + size > segment_bytes:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > INT32_MAX:
            return True
        first = self.first_batch_timestamp()
        waited = max_ts - first if first >= 0 else max(0, now_ms - self.created_ms)
        return waited > segment_ms - self.roll_jitter_ms

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp: what segment.ms measures age from."""
        if self._first_batch_timestamp is None:
            self._first_batch_timestamp = next(
                (h.max_timestamp for _, h in scan_headers(self.file.fd, 0, self.size)), -1
            )
        return self._first_batch_timestamp

    # --- finding batches -------------------------------------------------------------------

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`."""
        if offset >= self.next_offset:
            return None
        _, start = self.offset_index.lookup(offset)
        for pos, header in scan_headers(self.file.fd, start, self.size):
            if header.last_offset >= offset:
                return pos, header
        return None

    def boundary_at_or_before(self, bound: int, start: int) -> int:
        """The end of the last whole batch that ends at or before `bound`, scanning from `start`."""
        if bound >= self.size:
            return self.size
        pos = max(start, self.offset_index.position_floor(bound))
        end = pos
        for batch_pos, header in scan_headers(self.file.fd, pos, self.size):
            if batch_pos + header.size > bound:
                break
            end = batch_pos + header.size
        return end

    def find_timestamp(self, timestamp: int, min_offset: int) -> Found | None:
        """First record at offset >= min_offset with timestamp >= `timestamp`, via the time index."""
        _, indexed = self.time_index.lookup(timestamp)
        _, start = self.offset_index.lookup(max(indexed, min_offset))
        for pos, header in scan_headers(self.file.fd, start, self.size):
            if header.last_offset >= min_offset and header.max_timestamp >= timestamp:
                found = self._record_at(pos, header, lambda ts: ts >= timestamp, min_offset)
                if found is not None:
                    return found
        return None

    def find_max_timestamp(self) -> Found | None:
        """The record holding this segment's max timestamp (the first, on ties)."""
        if self.max_timestamp == NO_TIMESTAMP:
            return None
        target = self.max_timestamp
        _, start = self.offset_index.lookup(self.offset_of_max_timestamp)
        for pos, header in scan_headers(self.file.fd, start, self.size):
            if header.max_timestamp == target:
                return self._record_at(pos, header, lambda ts: ts == target, header.base_offset)
        return None

    def _record_at(
        self, pos: int, header: BatchHeader, match: Callable[[int], bool], min_offset: int
    ) -> Found | None:
        """Resolve a batch to the record ListOffsets reports (decodes just this batch)."""
        epoch = header.partition_leader_epoch
        if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
            return max(header.base_offset, min_offset), header.max_timestamp, epoch
        try:
            _, records = decode_batch(os.pread(self.file.fd, header.size, pos), check_crc=False)
        except ProtocolError:
            return max(header.base_offset, min_offset), header.max_timestamp, epoch
        for record in records:
            if record.offset >= min_offset and match(record.timestamp):
                return record.offset, record.timestamp, epoch
        return None

    # --- recovery and truncation -----------------------------------------------------------

    def load_tail(self) -> None:
        """After a clean open: find the end offset, max timestamp and index spacing cheaply."""
        last = self.time_index.last()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        entry = self.offset_index.last_entry()
        start = 0 if entry is None else entry[1]
        for _, header in scan_headers(self.file.fd, start, self.size):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        self.bytes_since_index = self.size - start

    def recover(self) -> int:
        """Validate every batch, truncate at the first bad one, rebuild indexes; bytes dropped."""
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.bytes_since_index = 0
        self._first_batch_timestamp = None
        scan = ValidatingScan(self.file.fd, 0, self.size, self.base_offset)
        offsets: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        for pos, header in scan:
            self._index_one(pos, header, offsets, times)
        dropped = self.size - scan.valid_end
        if dropped:
            os.ftruncate(self.file.fd, scan.valid_end)
            self.size = scan.valid_end
        self.offset_index.append(offsets)
        self.time_index.append(times)
        return dropped

    def _index_one(
        self,
        pos: int,
        header: BatchHeader,
        offsets: list[tuple[int, int]],
        times: list[tuple[int, int]],
    ) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = (
                header.max_timestamp,
                header.last_offset,
            )
        if self.bytes_since_index > self.index_interval_bytes:
            offsets.append((header.last_offset, pos))
            if not times or self.max_timestamp > times[-1][0]:
                times.append((self.max_timestamp, self.offset_of_max_timestamp))
            self.bytes_since_index = 0
        self.bytes_since_index += header.size
        self.next_offset = header.next_offset

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; bytes dropped."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        cut = found[0]
        dropped = self.size - cut
        os.ftruncate(self.file.fd, cut)
        self.size = cut
        self.recover()  # rebuild indexes and in-memory state from the kept prefix
        return dropped

    # --- lifecycle -------------------------------------------------------------------------

    def sync_fds(self) -> list[int]:
        """Duplicates of the three fds, so a worker thread can fsync them without racing close()."""
        return [os.dup(fd) for fd in (self.file.fd, self.offset_index.fd, self.time_index.fd)]

    def close(self, release: bool = False) -> None:
        """Close the files; with `release` the `.log` fd stays open for live ReadResults."""
        self.offset_index.close()
        self.time_index.close()
        if not release:
            self.file.close()

    def delete(self) -> None:
        """Unlink the files, `.log` first (a crash in between leaves orphan indexes, which the
        loader removes, never a log without its batches); the `.log` fd lives on while a
        ReadResult still holds it."""
        with contextlib.suppress(FileNotFoundError):
            self.file.path.unlink()
        self.offset_index.delete()
        self.time_index.delete()
