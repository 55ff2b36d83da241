"""The aborted-transaction index of one segment: `<base>.txnindex` (Kafka's TransactionIndex).

One entry per aborted transaction whose ABORT marker lies in this segment, in
marker order (so `lastOffset` strictly increases), big-endian, no header::

    0   version           int16   0
    2   producerId        int64
    10  firstOffset       int64   the transaction's first offset (maybe in an earlier segment)
    18  lastOffset        int64   the offset of its ABORT marker
    26  lastStableOffset  int64   the LSO right after the abort: the first offset of the
                                  oldest transaction of another producer still open then,
                                  else lastOffset + 1
    = 34 bytes an entry

A read_committed Fetch answers the aborted transactions overlapping the fetched
range [fetch offset, upper bound): every entry with lastOffset >= fetch offset and
firstOffset < upper bound, walking this segment's entries and then the later
segments', and stopping at the first entry whose lastStableOffset reaches the upper
bound (no transaction aborted later can start below it). Committed transactions and
transactions without data need no entry; a segment with no aborted transaction has
no file at all.

The file is a cache of what the log's markers say, kept like the offset index:
entries are added in memory when the marker is appended and written out (open,
append, close) when the segment rolls, is flushed, or the log closes cleanly, so a
partition holds no txnindex fd. Entries of older segments are loaded on first use.

Crash recovery: a crash may lose entries not yet written out. Those belong to
segments past the recovery point, which the loader rescans; their txnindex is then
rebuilt by replaying the log's batches through producer state from a snapshot at or
below the first rescanned segment (a transaction may have started in an earlier
segment, so the marker alone does not say where its data begins). After a clean
shutdown the files are trusted once they pass a sanity check: a length that is a
multiple of 34, version 0, lastOffset strictly increasing within [base, segment end),
firstOffset <= lastOffset; a file failing it is rebuilt the same way. A segment
installed by an interrupted cleaner swap also gets its index rebuilt.
"""

from __future__ import annotations

import contextlib
import os
import struct
from bisect import bisect_left
from pathlib import Path
from typing import NamedTuple

from strom.storage import disk

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry: what a read_committed consumer needs to skip an aborted transaction."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndex:
    """One segment's aborted transactions: a file of `ENTRY`s, cached in memory once read."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        try:
            self._file_size = disk.size(path)
        except FileNotFoundError:
            self._file_size = 0
        self._entries: list[AbortedTxn] | None = None
        self._lasts: list[int] | None = None
        self.corrupt = False
        """The file failed to decode (unknown version, torn entry): the loader rebuilds it."""

    # --- reading ---------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """How many entries (in memory, or in the file when not loaded yet)."""
        if self._entries is not None:
            return len(self._entries)
        return self._file_size // ENTRY_SIZE

    @property
    def pending(self) -> int:
        """Entries in memory the file does not hold yet."""
        return self.count - self._file_size // ENTRY_SIZE

    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest marker first (loaded from the file on first use)."""
        return list(self._load())

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            whole = self._file_size - self._file_size % ENTRY_SIZE
            data = b""
            if whole:
                fd = disk.open(self.path, os.O_RDONLY)
                try:
                    data = disk.pread(fd, whole, 0)
                finally:
                    disk.close(fd)
            entries = []
            for version, pid, first, last, lso in ENTRY.iter_unpack(
                data[: len(data) - len(data) % ENTRY_SIZE]
            ):
                if version != VERSION:
                    self.corrupt = True
                    break
                entries.append(AbortedTxn(pid, first, last, lso))
            self._entries = entries
            self._lasts = [e.last_offset for e in entries]
        return self._entries

    def collect(self, fetch_offset: int, upper: int, out: list[AbortedTxn]) -> bool:
        """Add to `out` the entries overlapping [fetch_offset, upper); True once an entry's
        last stable offset reaches `upper` (the search need not go on to later segments)."""
        entries = self._load()
        assert self._lasts is not None
        for i in range(bisect_left(self._lasts, fetch_offset), len(entries)):
            txn = entries[i]
            if txn.first_offset < upper:
                out.append(txn)
            if txn.last_stable_offset >= upper:
                return True
        return False

    def sane(self, next_offset: int) -> bool:
        """Kafka's sanityCheck and more: whole entries of version 0, markers inside this
        segment in increasing order, each transaction starting no later than its marker."""
        if self._file_size % ENTRY_SIZE:
            return False
        if not self._file_size:
            return True
        entries = self._load()
        if self.corrupt:
            return False
        previous = self.base_offset - 1
        for txn in entries:
            if not (
                previous < txn.last_offset < next_offset and txn.first_offset <= txn.last_offset
            ):
                return False
            previous = txn.last_offset
        return True

    # --- writing ---------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry in memory (`write_out` puts it in the file); markers only move forward."""
        entries = self._load()
        assert self._lasts is not None
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction at {txn.last_offset} does not follow {entries[-1].last_offset}"
            )
        entries.append(txn)
        self._lasts.append(txn.last_offset)

    def write_out(self) -> int | None:
        """Append pending entries to the file (created on the first) and return its open fd
        for the caller to fsync and close; None when there is no file. On OSError the file is
        cut back to its previous length and the error re-raised."""
        if self._entries is None or (not self.pending and not self._file_size):
            return None if not self._file_size else self._open_fd()
        done = self._file_size // ENTRY_SIZE
        data = b"".join(
            ENTRY.pack(VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in self._entries[done:]
        )
        fd = disk.append_entries(self.path, self._file_size, ENTRY_SIZE, data)
        self._file_size = done * ENTRY_SIZE + len(data)
        return fd

    def _open_fd(self) -> int | None:
        try:
            return disk.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._file_size = 0
            return None

    def save(self) -> None:
        """`write_out` without the fsync (roll, recovery): the flush that follows syncs it."""
        if self.pending:
            fd = self.write_out()
            if fd is not None:
                disk.close(fd)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the file too)."""
        entries = self._load()
        assert self._lasts is not None
        keep = bisect_left(self._lasts, offset)
        del entries[keep:]
        del self._lasts[keep:]
        whole = keep * ENTRY_SIZE
        if self._file_size > whole:
            disk.truncate(self.path, whole)
            self._file_size = whole

    def reset(self) -> None:
        """No entries, in memory or on disk (before a rebuild)."""
        self._entries, self._lasts = [], []
        self.corrupt = False
        if self._file_size or disk.exists(self.path):
            with contextlib.suppress(FileNotFoundError):
                disk.unlink(self.path)
        self._file_size = 0

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            disk.unlink(self.path)
