"""Sparse per-segment indexes: offset -> file position, and timestamp -> offset.

Both are rebuildable caches of the segment's `.log` file (big-endian, no header)::

    <base>.index      8-byte entries: relativeOffset int32, position int32
    <base>.timeindex  12-byte entries: timestamp int64, relativeOffset int32

relativeOffset = offset - segment base offset. An offset-index entry is written
for a batch once more than `index.interval.bytes` have been appended since the
previous entry; it holds the batch's *last* offset and the batch's start
position, so "largest entry <= target" gives a position at or before the batch
holding the target. A time-index entry (written alongside) holds the largest
timestamp seen so far in the segment and the last offset of the first batch that
reached it; timestamps strictly increase from entry to entry.

Files are appended to, never preallocated, so their length is entries x size.
No index keeps a file open: entries are loaded into memory (as `array`s) when
first used, new entries are added in memory and written out by `write_out()`,
which the segment calls when it rolls, when it is flushed and at clean shutdown
(open, append, close), so a partition holds no index fd at all.

Crash recovery: a file may therefore lag its log (entries appended since the
last write-out are lost by a crash). That is harmless: such a segment lies past
the recovery point and is rescanned, and a short index of a trusted segment is
extended by the loader's tail scan. A length that is not a multiple of the
entry size, keys that go backwards, or a last entry pointing outside the segment
means the file is corrupt; the segment is then rescanned and the index rewritten.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from strom.storage import disk

NO_TIMESTAMP = -1


class _Index:
    """Shared file/array plumbing: an append-only file of (key, value) entries, cached in memory."""

    ENTRY: struct.Struct
    KEY_TYPE: str
    VALUE_TYPE: str

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_bytes // self.ENTRY.size
        try:
            self._file_size = disk.size(path)
            self.was_missing = False
        except FileNotFoundError:
            self._file_size = 0
            self.was_missing = True
        self._keys: array[int] | None = None
        self._values: array[int] | None = None

    @property
    def entries(self) -> int:
        if self._keys is not None:
            return len(self._keys)
        return self._file_size // self.ENTRY.size

    @property
    def pending(self) -> int:
        """Entries in memory that the file does not hold yet."""
        return self.entries - self._file_size // self.ENTRY.size

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def _pread(self, size: int, position: int) -> bytes:
        """Read from the file through a short-lived fd (no index keeps one open)."""
        fd = disk.open(self.path, os.O_RDONLY)
        try:
            return disk.pread(fd, size, position)
        finally:
            disk.close(fd)

    def _load(self) -> tuple[array[int], array[int]]:
        if self._keys is None or self._values is None:
            size = self.ENTRY.size
            whole = self._file_size - self._file_size % size
            data = self._pread(whole, 0) if whole else b""
            self._keys, self._values = self._decode(data[: len(data) - len(data) % size])
        return self._keys, self._values

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        keys, values = array(self.KEY_TYPE), array(self.VALUE_TYPE)
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        return keys, values

    def entry(self, n: int) -> tuple[int, int]:
        """Entry `n`, read from the file unless the arrays are already loaded."""
        if self._keys is not None and self._values is not None:
            return self._keys[n], self._values[n]
        key, value = self.ENTRY.unpack(self._pread(self.ENTRY.size, n * self.ENTRY.size))
        return key, value

    def last_entry(self) -> tuple[int, int] | None:
        """The final entry, read without loading the whole file."""
        if self._keys is not None and self._values is not None:
            return (self._keys[-1], self._values[-1]) if self._keys else None
        count = self._file_size // self.ENTRY.size
        return self.entry(count - 1) if count else None

    def file_ok(self) -> bool:
        return self._file_size % self.ENTRY.size == 0

    def append_entries(self, entries: list[tuple[int, int]]) -> None:
        """Add (key, value) entries in memory; `write_out()` puts them in the file."""
        keys, values = self._load()
        for key, value in entries:
            keys.append(key)
            values.append(value)

    def write_out(self) -> int:
        """Append the pending entries to the file (creating it) and return its open fd, for
        the caller to fsync and close. On OSError the file is cut back and it re-raises."""
        keys, values = self._load()
        size = self.ENTRY.size
        done = self._file_size // size
        data = b"".join(self.ENTRY.pack(keys[i], values[i]) for i in range(done, len(keys)))
        fd = disk.append_entries(self.path, self._file_size, size, data)
        self._file_size = done * size + len(data)
        self.was_missing = False
        return fd

    def save(self) -> None:
        """`write_out()` without the fsync: enough for a cache (recovery rebuilds what is lost)."""
        if self.pending or self.was_missing or not self.file_ok():
            disk.close(self.write_out())

    def keep(self, count: int) -> None:
        """Keep only the first `count` entries (the file too, if it holds more)."""
        keys, values = self._load()
        del keys[count:]
        del values[count:]
        whole = count * self.ENTRY.size
        if self._file_size > whole:
            disk.truncate(self.path, whole)
            self._file_size = whole

    def reset(self) -> None:
        """Drop every entry, in memory and in the file."""
        self._keys, self._values = array(self.KEY_TYPE), array(self.VALUE_TYPE)
        if self._file_size:
            with contextlib.suppress(FileNotFoundError):
                disk.truncate(self.path, 0)
            self._file_size = 0

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            disk.unlink(self.path)


class OffsetIndex(_Index):
    """Maps a relative offset to the file position of a batch at or before it."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"
    VALUE_TYPE = "i"

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        """Two int32 columns in C: a big index loads without a Python loop per entry."""
        both = array("i", data)
        if sys.byteorder == "little":
            both.byteswap()
        return both[0::2], both[1::2]

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= offset, else (base_offset, 0)."""
        keys, values = self._load()
        i = bisect_right(keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + keys[i], values[i]

    def upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after file position `position` (None: none),
        Kafka's fetchUpperBoundOffset: the bound of the aborted transactions a read that ends
        at `position` reports."""
        keys, values = self._load()
        i = bisect_left(values, position)
        return self.base_offset + keys[i] if i < len(keys) else None

    def position_floor(self, position: int) -> int:
        """The largest indexed batch position <= `position` (0 if none): a known batch boundary."""
        _, values = self._load()
        i = bisect_right(values, position) - 1
        return values[i] if i >= 0 else 0

    def append(self, entries: list[tuple[int, int]]) -> None:
        """Append (absolute last offset, position) entries."""
        self.append_entries([(offset - self.base_offset, pos) for offset, pos in entries])

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        keys, _ = self._load()
        self.keep(bisect_right(keys, offset - self.base_offset - 1))

    def sane(self, segment_size: int) -> bool:
        """Cheap check that the file is usable (Kafka's sanityCheck plus bounds)."""
        if not self.file_ok():
            return False
        last = self.last_entry()
        if last is None:
            return True
        first_key, first_pos = self.entry(0)
        return 0 <= first_key <= last[0] and 0 <= first_pos <= last[1] < segment_size


class TimeIndex(_Index):
    """Maps a timestamp to the offset of the first batch that reached it."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"
    VALUE_TYPE = "i"

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base)."""
        keys, values = self._load()
        i = bisect_right(keys, timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return keys[i], self.base_offset + values[i]

    def last(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        last = self.last_entry()
        return None if last is None else (last[0], self.base_offset + last[1])

    def append(self, entries: list[tuple[int, int]]) -> None:
        """Append (timestamp, absolute offset) entries (caller keeps timestamps increasing)."""
        self.append_entries([(ts, offset - self.base_offset) for ts, offset in entries])

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        _, values = self._load()
        rel = offset - self.base_offset
        count = len(values)
        while count and values[count - 1] >= rel:
            count -= 1
        self.keep(count)

    def sane(self) -> bool:
        if not self.file_ok():
            return False
        last = self.last_entry()
        if last is None:
            return True
        first_ts, first_rel = self.entry(0)
        return first_rel >= 0 and first_ts <= last[0] and first_rel <= last[1]
