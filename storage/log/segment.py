"""One log segment: `<20-digit base offset>.log` plus its `.index`, `.timeindex` and `.txnindex`.

The `.log` file is nothing but whole RecordBatch v2 batches back to back, exactly
as they travel on the wire (see `strom.wire.records.batch` for the 61-byte header), in
increasing offset order; the file name is the segment's base offset, so every
offset in it is >= the name and the next segment's name is > its last offset.

The cleaner builds a replacement segment under the same names plus a suffix
(`<base>.log.cleaned`, ...; see strom.storage.log.swap for how it goes live).

Open files: only the active segment (the one appended to) keeps its `.log` open;
an older segment opens it for each use and the fd closes when the last user
(a `ReadResult` waiting for sendfile, say) lets go of it. No index keeps a file
open (strom.storage.log.index, strom.storage.log.txn_index). So a partition holds
one fd.

The aborted-transaction index (`.txnindex`) is not derived from this segment alone
(a transaction may begin in an earlier one): the partition log adds its entries and
the loader rebuilds it (strom.storage.log.txn_index); `recover()` leaves it alone.

Crash recovery: the file may end in a torn batch or hold garbage after a power
loss. `recover()` walks it from the start, checks framing, magic, CRC-32C and
that offsets only go forward, truncates the file at the first bad batch and
rewrites both indexes from what it kept. Without recovery (clean shutdown,
below the recovery point) only a short tail is scanned to find the end offset.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

from strom.storage import disk
from strom.storage.fileio import LogFile, SegmentFile, ValidatingScan, scan_headers
from strom.storage.log.index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from strom.storage.log.txn_index import TXN_INDEX_SUFFIX, TxnIndex
from strom.wire.records import BatchHeader

INT32_MAX = 2**31 - 1
LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"


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
        active: bool = True,
    ) -> None:
        """`active`: create the `.log` if missing and keep it open; else it must exist."""
        self.base_offset = base_offset
        stem = segment_name(base_offset)
        self.path = directory / f"{stem}{LOG_SUFFIX}{suffix}"
        self.log_file = LogFile(self.path, keep_open=active)
        self.size = disk.size(self.path)
        self.offset_index = OffsetIndex(
            directory / f"{stem}{INDEX_SUFFIX}{suffix}", base_offset, max_index_bytes
        )
        self.time_index = TimeIndex(
            directory / f"{stem}{TIME_INDEX_SUFFIX}{suffix}", base_offset, max_index_bytes
        )
        self.txn_index = TxnIndex(directory / f"{stem}{TXN_INDEX_SUFFIX}{suffix}", base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index = 0
        self.created_ms = now_ms
        self.roll_jitter_ms = roll_jitter_ms
        self._first_batch_timestamp: int | None = None
        self._last_batch: tuple[int, BatchHeader] | None = None
        """(position, header) of the last batch appended or indexed: a fetch at the log's
        tail (a follower's, a caught-up consumer's) finds it without the index and a scan.
        Trusted only while it still ends the file (`find_batch`)."""

    def open_file(self) -> SegmentFile:
        """The open `.log` (see `LogFile`): hold it while using its fd."""
        return self.log_file.get()

    def set_active(self, active: bool) -> None:
        """The active segment keeps its `.log` open for appends; others open it per use."""
        self.log_file.keep_open(active)

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

        The index entries stay in memory until `write_indexes()` or `sync_fds()`. On OSError
        the `.log` is truncated back and nothing in memory changes.
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
        file = self.open_file()
        try:
            disk.write_all(file.fd, data)
        except OSError:
            with contextlib.suppress(OSError):
                disk.ftruncate(file.fd, start)
            raise
        self.offset_index.append(offsets)
        self.time_index.append(times)
        if self.size == 0:
            self._first_batch_timestamp = batches[0][1].max_timestamp
        last_pos, last_header = batches[-1]
        self._last_batch = (start + last_pos, last_header)
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
            file = self.open_file()
            self._first_batch_timestamp = next(
                (h.max_timestamp for _, h in scan_headers(file.fd, 0, self.size)), -1
            )
        return self._first_batch_timestamp

    def largest_timestamp(self) -> int:
        """What retention.ms and min.compaction.lag.ms age a segment by (Kafka's
        largestTimestamp): its max timestamp, else its file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return disk.mtime_ms(self.path)

    # --- finding batches -------------------------------------------------------------------

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`."""
        if offset >= self.next_offset:
            return None
        last = self._last_batch
        if (
            last is not None
            and last[1].base_offset <= offset
            and last[0] + last[1].size == self.size
        ):  # in the last batch (the one before it ends below its base offset)
            return last
        _, start = self.offset_index.lookup(offset)
        file = self.open_file()
        for pos, header in scan_headers(file.fd, start, self.size):
            if header.last_offset >= offset:
                return pos, header
        return None

    def boundary_at_or_before(self, bound: int, start: int) -> int:
        """The end of the last whole batch that ends at or before `bound`, scanning from `start`."""
        if bound >= self.size:
            return self.size
        pos = max(start, self.offset_index.position_floor(bound))
        end = pos
        file = self.open_file()
        for batch_pos, header in scan_headers(file.fd, pos, self.size):
            if batch_pos + header.size > bound:
                break
            end = batch_pos + header.size
        return end

    # --- recovery and truncation -----------------------------------------------------------

    def load_tail(self) -> None:
        """After a clean open: find the end offset and max timestamp by scanning only the bytes
        after the last offset-index entry, indexing them (a lagging index is extended)."""
        last = self.time_index.last()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        entry = self.offset_index.last_entry()
        start = 0 if entry is None else entry[1]
        self.bytes_since_index = 0
        file = self.open_file()
        self._index_all(scan_headers(file.fd, start, self.size))

    def recover(self) -> int:
        """Validate every batch, truncate at the first bad one, rebuild indexes; bytes dropped."""
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.bytes_since_index = 0
        self._first_batch_timestamp = None
        self._last_batch = None
        file = self.open_file()
        scan = ValidatingScan(file.fd, 0, self.size, self.base_offset)
        self._index_all(scan)
        dropped = self.size - scan.valid_end
        if dropped:
            disk.ftruncate(file.fd, scan.valid_end)
            self.size = scan.valid_end
        return dropped

    def _index_all(self, batches: Iterable[tuple[int, BatchHeader]]) -> None:
        """Account for scanned batches as `append` would have, adding their index entries."""
        offsets: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        last_ts = self._last_time_entry()
        for pos, header in batches:
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if self.bytes_since_index > self.index_interval_bytes:
                offsets.append((header.last_offset, pos))
                if self.max_timestamp > last_ts:
                    times.append((self.max_timestamp, self.offset_of_max_timestamp))
                    last_ts = self.max_timestamp
                self.bytes_since_index = 0
            self.bytes_since_index += header.size
            self.next_offset = header.next_offset
            self._last_batch = (pos, header)
        self.offset_index.append(offsets)
        self.time_index.append(times)

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; bytes dropped."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        cut = found[0]
        dropped = self.size - cut
        file = self.open_file()
        disk.ftruncate(file.fd, cut)
        self.size = cut
        self.recover()  # rebuild indexes and in-memory state from the kept prefix
        self.txn_index.truncate_to(self.next_offset)
        return dropped

    # --- lifecycle -------------------------------------------------------------------------

    def write_indexes(self) -> None:
        """Write pending index entries (no fsync): on roll, and after loading or recovery.
        An empty segment needs no index files yet (the loader expects none), which keeps
        creating a partition to its `.log` and epoch checkpoint."""
        self.txn_index.save()
        if self.size == 0 and not (self.offset_index.pending or self.time_index.pending):
            return
        self.offset_index.save()
        self.time_index.save()

    def sync_fds(self) -> list[int]:
        """Fds of the `.log` and both indexes (pending entries written first), for a worker
        thread to fsync and close without racing close(). OSError: none are left open."""
        file = self.open_file()
        fds = [disk.dup(file.fd)]
        try:
            fds.append(self.offset_index.write_out())
            fds.append(self.time_index.write_out())
            txn_fd = self.txn_index.write_out()
            if txn_fd is not None:
                fds.append(txn_fd)
        except OSError:
            for fd in fds:
                disk.close(fd)
            raise
        return fds

    def close(self, release: bool = False) -> None:
        """Forget the files; unpersisted index entries are dropped (a clean shutdown has just
        flushed them). `release`: a ReadResult may keep the `.log` fd (see `LogFile.close`)."""
        self.log_file.close(release)

    def delete(self) -> None:
        """Unlink the files, `.log` first (a crash in between leaves orphan indexes, which the
        loader removes, never a log without its batches); an open `.log` fd lives on while a
        ReadResult still holds it."""
        self.close(release=True)
        with contextlib.suppress(FileNotFoundError):
            disk.unlink(self.path)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
