"""Storage's file I/O, through one switchable `Disk` (see `interface` for the contract).

Every file operation of the partition log, the cleaner and the Raft store goes through the
functions of this module (`disk.open`, `disk.write`, `disk.fsync`, ...), which forward to the
current `Disk`: `OsDisk` unless a test switched it with `use`. The switch is per process;
paths tell one node's files from another's, so one switched disk serves a whole simulated
cluster in one process.

Not through it: `sendfile` of a segment's descriptor to a socket (the network layer's).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from pathlib import Path

from strom.storage.disk.interface import Disk
from strom.storage.disk.os_disk import OsDisk
from strom.wire.primitives import Buffer

__all__ = ["Disk", "OsDisk", "current", "use"]

_current: Disk = OsDisk()


def current() -> Disk:
    return _current


def use(disk: Disk) -> Disk:
    """Make `disk` the one storage uses from now on; returns the previous one."""
    global _current
    previous, _current = _current, disk
    return previous


# --- the interface, forwarded -------------------------------------------------------------------


def open(path: Path, flags: int, mode: int = 0o644) -> int:
    return _current.open(path, flags, mode)


def close(fd: int) -> None:
    _current.close(fd)


def dup(fd: int) -> int:
    return _current.dup(fd)


def write(fd: int, data: Buffer) -> int:
    return _current.write(fd, data)


def pwrite(fd: int, data: Buffer, offset: int) -> int:
    return _current.pwrite(fd, data, offset)


def pread(fd: int, size: int, offset: int) -> bytes:
    return _current.pread(fd, size, offset)


def fsync(fd: int) -> None:
    _current.fsync(fd)


def ftruncate(fd: int, size: int) -> None:
    _current.ftruncate(fd, size)


def fsize(fd: int) -> int:
    return _current.fsize(fd)


def size(path: Path) -> int:
    return _current.size(path)


def mtime_ms(path: Path) -> int:
    return _current.mtime_ms(path)


def truncate(path: Path, size: int) -> None:
    _current.truncate(path, size)


def replace(source: Path, target: Path) -> None:
    _current.replace(source, target)


def unlink(path: Path) -> None:
    _current.unlink(path)


def mkdir(path: Path) -> None:
    _current.mkdir(path)


def rmtree(path: Path) -> None:
    _current.rmtree(path)


def listdir(path: Path) -> list[str]:
    return _current.listdir(path)


def exists(path: Path) -> bool:
    return _current.exists(path)


def is_dir(path: Path) -> bool:
    return _current.is_dir(path)


def lock(path: Path) -> int:
    return _current.lock(path)


def read_file(path: Path) -> bytes:
    return _current.read_file(path)


# --- built on the interface -------------------------------------------------------------------


def makedirs(path: Path) -> None:
    """mkdir -p."""
    if _current.is_dir(path):
        return
    if path.parent != path:
        makedirs(path.parent)
    try:
        _current.mkdir(path)
    except FileExistsError:
        if not _current.is_dir(path):
            raise


def write_all(fd: int, data: Buffer) -> None:
    """Write everything, looping over short writes; OSError propagates (caller rolls back)."""
    view = memoryview(data)
    while view:
        written = _current.write(fd, view)
        view = view[written:]


def pwrite_all(fd: int, data: Buffer, offset: int) -> None:
    """Write everything at `offset`, looping over short writes; OSError propagates."""
    view = memoryview(data)
    while view:
        written = _current.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def read_range(path: Path, offset: int, size: int) -> bytes:
    """`size` bytes of a file from `offset` (fewer at its end)."""
    fd = _current.open(path, os.O_RDONLY)
    try:
        return _current.pread(fd, size, offset)
    finally:
        _current.close(fd)


def truncate_synced(path: Path, size: int) -> None:
    """Cut a file to `size` and fsync it."""
    fd = _current.open(path, os.O_RDWR)
    try:
        _current.ftruncate(fd, size)
        _current.fsync(fd)
    finally:
        _current.close(fd)


def append_entries(path: Path, file_size: int, entry_size: int, data: Buffer) -> int:
    """Append whole fixed-size entries to the file at `path` (created if missing), whose
    current length is `file_size`, and return its open fd for the caller to fsync and close.

    A torn entry at the end (a crash mid-append) is cut first. On OSError the file is cut
    back to its last whole entry, the fd closed and the error re-raised."""
    whole = file_size - file_size % entry_size
    fd = _current.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if file_size != whole:
            _current.ftruncate(fd, whole)
        try:
            write_all(fd, data)
        except OSError:
            with contextlib.suppress(OSError):
                _current.ftruncate(fd, whole)
            raise
    except OSError:
        _current.close(fd)
        raise
    return fd


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by name (FileNotFoundError if it is gone)."""
    fd = _current.open(path, os.O_RDONLY)
    try:
        _current.fsync(fd)
    finally:
        _current.close(fd)


def glob(directory: Path, pattern: str) -> list[Path]:
    """The entries of `directory` whose names match `pattern` (fnmatch), sorted."""
    return sorted(
        directory / name
        for name in _current.listdir(directory)
        if fnmatch.fnmatchcase(name, pattern)
    )


def unlink_missing_ok(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        _current.unlink(path)
