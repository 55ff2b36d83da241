"""`Disk`: every file operation storage makes, as one small interface.

The methods are the POSIX calls storage uses, with their semantics and errors (`OSError` with
the errno the kernel would give: FileNotFoundError, FileExistsError, ENOSPC, EIO, ...). Files
are reached through integer descriptors, as with `os`; paths are `pathlib.Path`s.

What the interface promises about durability is what POSIX promises, no more:

- `write`/`pwrite` reach the file at once for every reader of this machine (the page cache),
  but survive a power loss only once `fsync` of that file returned;
- a file's *name* (its creation, a `replace` onto it, an `unlink`) survives a power loss only
  once `fsync` of a descriptor of its *directory* returned (`fsync_path(directory)`);
- a power loss keeps, of what was not synced, anything from nothing to all of it, and the
  last write may be torn (a prefix of it, or its length with zeros where its bytes did not
  land).

Storage is written against that contract. Implementations: `OsDisk` (the kernel),
`JournalingDisk` (the kernel, plus a journal that lets a test cut the power of a real
process's disk afterwards: `strom.storage.disk.journal`), `MemoryDisk` (an in-memory disk for
simulations: it can cut the power, tear writes, fill up and fail fsync).
"""

from __future__ import annotations

import abc
from pathlib import Path

from strom.wire.primitives import Buffer


class Disk(abc.ABC):
    """File I/O as storage makes it (see the module docstring)."""

    # --- descriptors ------------------------------------------------------------------------

    @abc.abstractmethod
    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        """os.open: `flags` of the `os.O_*` constants (O_RDONLY/O_WRONLY/O_RDWR, O_CREAT,
        O_EXCL, O_TRUNC, O_APPEND; a directory opens O_RDONLY, to fsync it)."""

    @abc.abstractmethod
    def close(self, fd: int) -> None: ...

    @abc.abstractmethod
    def dup(self, fd: int) -> int: ...

    @abc.abstractmethod
    def write(self, fd: int, data: Buffer) -> int:
        """At the file position (its end with O_APPEND); returns the bytes written."""

    @abc.abstractmethod
    def pwrite(self, fd: int, data: Buffer, offset: int) -> int: ...

    @abc.abstractmethod
    def pread(self, fd: int, size: int, offset: int) -> bytes: ...

    @abc.abstractmethod
    def fsync(self, fd: int) -> None:
        """A file's bytes, or a directory's entries, survive a power loss from now on."""

    @abc.abstractmethod
    def ftruncate(self, fd: int, size: int) -> None: ...

    @abc.abstractmethod
    def fsize(self, fd: int) -> int:
        """The open file's length (fstat's st_size)."""

    @abc.abstractmethod
    def lock(self, path: Path) -> int:
        """Open `path` (created if missing) and take an exclusive lock on it, as `flock(LOCK_EX |
        LOCK_NB)` does: a descriptor whose `close` releases the lock, as does the death of the
        process holding it. BlockingIOError while another descriptor holds it."""

    # --- paths --------------------------------------------------------------------------------

    @abc.abstractmethod
    def size(self, path: Path) -> int:
        """A file's length (stat's st_size)."""

    @abc.abstractmethod
    def mtime_ms(self, path: Path) -> int:
        """A file's last modification, in milliseconds since the epoch."""

    @abc.abstractmethod
    def truncate(self, path: Path, size: int) -> None: ...

    @abc.abstractmethod
    def replace(self, source: Path, target: Path) -> None:
        """os.replace: rename, atomically replacing `target` if it exists."""

    @abc.abstractmethod
    def unlink(self, path: Path) -> None: ...

    @abc.abstractmethod
    def mkdir(self, path: Path) -> None:
        """One directory; its parent must exist (FileExistsError if `path` does)."""

    @abc.abstractmethod
    def rmtree(self, path: Path) -> None:
        """Remove a directory and everything under it (a missing one is no error)."""

    @abc.abstractmethod
    def listdir(self, path: Path) -> list[str]:
        """The names in a directory, in no particular order."""

    @abc.abstractmethod
    def exists(self, path: Path) -> bool: ...

    @abc.abstractmethod
    def is_dir(self, path: Path) -> bool: ...

    @abc.abstractmethod
    def read_file(self, path: Path) -> bytes:
        """A whole file."""
