"""Low-level file helpers: whole writes, segment fds opened on demand, and batch scans.

All file access goes through `strom.storage.disk` (the switchable Disk).

Scans read the file in large chunks with `pread` and parse only the 61-byte
batch headers (see `strom.wire.records.batch`), so walking a segment costs one
syscall per chunk rather than one per batch. `scan_headers` trusts the bytes
(they were validated when written or recovered); `read_batches` does the same
but also hands out each batch's bytes (the cleaner); `ValidatingScan` is the
recovery path and stops at the first batch that is torn, malformed, fails its
CRC or goes backwards in offsets.
"""

from __future__ import annotations

import errno
import os
import weakref
from collections.abc import Iterator
from pathlib import Path

from strom.storage import disk
from strom.storage.log_errors import CorruptLogError
from strom.wire.errors import ProtocolError
from strom.wire.records import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    peek_length,
    validate_batch,
)

SCAN_CHUNK = 16 * 1024
INT32_MAX = 2**31 - 1


class SegmentFile:
    """An open `.log` file shared by its segment and any ReadResult still pointing into it.

    `release()` (segment deleted) leaves the fd open until the last reference
    goes, so a pending sendfile of a deleted segment still sends the old bytes;
    `close()` (shutdown) closes it at once.
    """

    __slots__ = ("__weakref__", "_finalizer", "fd", "path")

    def __init__(self, path: Path, flags: int) -> None:
        self.path = path
        opened_on = disk.current()  # closed on the disk it was opened on
        self.fd = opened_on.open(path, flags, 0o644)
        self._finalizer = weakref.finalize(self, opened_on.close, self.fd)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()


class LogFile:
    """A segment's `.log` path and, on demand, its open `SegmentFile`.

    Held open only while `keep_open` (the active segment, which appends); otherwise
    `get()` opens it and the fd closes when the last holder of the returned object
    lets go, so idle segments cost no fd. Callers keep the object while they use its
    fd; a second `get()` meanwhile (a ReadResult still alive, say) shares it.
    """

    def __init__(self, path: Path, *, keep_open: bool) -> None:
        self.path = path
        self._kept: SegmentFile | None = None
        self._last: weakref.ref[SegmentFile] | None = None
        self._closed = False
        if keep_open:
            self._kept = self._open(os.O_CREAT)

    def _open(self, flags: int = 0) -> SegmentFile:
        file = SegmentFile(self.path, os.O_RDWR | os.O_APPEND | flags)
        self._last = weakref.ref(file)
        return file

    def _held(self) -> SegmentFile | None:
        if self._kept is not None:
            return self._kept
        return None if self._last is None else self._last()

    def get(self) -> SegmentFile:
        """The open file: the kept one, one a reader still holds, or a fresh one."""
        if self._closed:
            raise OSError(errno.EBADF, f"{self.path} was closed")
        file = self._held()
        if file is None or file.closed:
            file = self._open()
        return file

    def keep_open(self, keep: bool) -> None:
        self._kept = self.get() if keep else None

    def close(self, release: bool) -> None:
        """No more `get()`. Without `release` an open fd closes now even if a ReadResult holds
        it (shutdown); with it, it lives on until the last holder is gone."""
        file = self._held()
        self._kept = self._last = None
        self._closed = True
        if file is not None and not release:
            file.close()


def scan_headers(
    fd: int, start: int, end: int, chunk: int = SCAN_CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in [start, end) of trusted bytes."""
    buf = b""
    buf_pos = start
    pos = start
    while pos < end:
        rel = pos - buf_pos
        if rel + HEADER_SIZE > len(buf):
            buf = disk.pread(fd, min(max(chunk, HEADER_SIZE), end - pos), pos)
            buf_pos, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                raise CorruptLogError(f"truncated batch header at position {pos}")
        header = BatchHeader(*HEADER.unpack_from(buf, rel))
        if header.magic != MAGIC or header.size < HEADER_SIZE or pos + header.size > end:
            raise CorruptLogError(f"bad batch header at position {pos}")
        yield pos, header
        pos += header.size


class ValidatingScan:
    """Iterate the valid prefix of [start, end): yields (position, header), then sets
    `valid_end` (where the valid prefix stops) and `problem` (why, or None if clean)."""

    def __init__(self, fd: int, start: int, end: int, base_offset: int, chunk: int = 1 << 20):
        self._fd = fd
        self._start = start
        self._end = end
        self._chunk = chunk
        self._base = base_offset
        self.next_offset = base_offset
        self.valid_end = start
        self.problem: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        fd, end = self._fd, self._end
        buf = b""
        buf_pos = pos = self._start
        while pos < end:
            if end - pos < LOG_OVERHEAD:
                self.problem = f"torn batch framing at position {pos}"
                return
            rel = pos - buf_pos
            if rel + LOG_OVERHEAD > len(buf):
                buf, buf_pos, rel = disk.pread(fd, min(self._chunk, end - pos), pos), pos, 0
            length = peek_length(buf, rel)
            size = length + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > end:
                self.problem = f"torn or bad batch length {length} at position {pos}"
                return
            if rel + size > len(buf):
                buf, buf_pos, rel = (
                    disk.pread(fd, min(max(self._chunk, size), end - pos), pos),
                    pos,
                    0,
                )
            try:
                header = validate_batch(memoryview(buf)[rel : rel + size])
            except ProtocolError as exc:
                self.problem = f"invalid batch at position {pos}: {exc}"
                return
            if header.base_offset < self.next_offset:
                self.problem = f"offset {header.base_offset} goes backwards at position {pos}"
                return
            if header.last_offset - self._base > INT32_MAX:
                self.problem = f"offset {header.last_offset} overflows the segment at {pos}"
                return
            yield pos, header
            pos += size
            self.valid_end = pos
            self.next_offset = header.next_offset


def read_batches(
    fd: int, start: int, end: int, chunk: int = 1 << 20
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Yield (header, bytes) of each whole batch in [start, end) of trusted bytes, reading
    `chunk` bytes at a time (more for a batch larger than that)."""
    buf = memoryview(b"")
    buf_pos = pos = start
    unpack = HEADER.unpack_from
    while pos < end:
        rel = pos - buf_pos
        if rel + HEADER_SIZE > len(buf):
            buf, buf_pos, rel = memoryview(disk.pread(fd, min(chunk, end - pos), pos)), pos, 0
        if len(buf) - rel < HEADER_SIZE:
            raise CorruptLogError(f"truncated batch header at position {pos}")
        header = BatchHeader(*unpack(buf, rel))
        size = header.batch_length + LOG_OVERHEAD
        if header.magic != MAGIC or size < HEADER_SIZE or pos + size > end:
            raise CorruptLogError(f"bad batch header at position {pos}")
        if rel + size > len(buf):
            buf, buf_pos, rel = (
                memoryview(disk.pread(fd, min(max(chunk, size), end - pos), pos)),
                pos,
                0,
            )
            if len(buf) < size:
                raise CorruptLogError(f"truncated batch at position {pos}")
        yield header, buf[rel : rel + size]
        pos += size
