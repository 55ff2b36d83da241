"""`MemoryDisk`: a `Disk` held in memory, for tests and simulations, that can fail as disks do.

It keeps its files in a `DiskModel`, so it knows at every moment what a power cut would keep:
`power_cut(rng, under)` cuts the power of a subtree (one node of a simulated cluster: its
open descriptors die with it, its files keep what the model says survives). Besides:

- `capacity`: bytes all files may hold together; a write or truncation past it fails with
  ENOSPC and changes nothing (a full disk);
- `fail_fsync(path) -> bool`: asked before each fsync; True makes that fsync fail with EIO,
  syncing nothing (a dying disk: after a failed fsync the data's fate is unknown).

Descriptors are numbers from 2**20 up, not kernel descriptors: `sendfile` of one to a socket
is the caller's to simulate. Single-threaded use, or callers serialise (storage's own locks do).
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from strom.storage.disk.interface import Disk
from strom.storage.disk.model import DirNode, DiskModel, FileNode, Node, os_error
from strom.wire.primitives import Buffer

FIRST_FD = 2**20


@dataclass
class _Open:
    node: Node
    path: Path
    append: bool
    position: int = 0


class MemoryDisk(Disk):
    def __init__(
        self,
        model: DiskModel | None = None,
        *,
        capacity: int | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.model = model or DiskModel(clock)
        self.capacity = capacity
        self.fail_fsync: Callable[[Path], bool] = lambda _path: False
        self._fds: dict[int, _Open] = {}
        self._next_fd = FIRST_FD
        self._locks: dict[Path, int] = {}
        """Locked paths and the descriptor holding each lock."""

    # --- failures ---------------------------------------------------------------------------------

    def power_cut(self, rng: random.Random, under: Path = Path("/"), *, keep: str = "random") -> None:
        """The power of `under` goes out: its descriptors are gone and its files keep what a
        power cut keeps (`DiskModel.crash`)."""
        under = Path(under)
        for fd, opened in list(self._fds.items()):
            if opened.path == under or under in opened.path.parents:
                del self._fds[fd]
        self.model.crash(rng, under, keep="none" if keep == "none" else "random")

    def used(self) -> int:
        return sum(len(n.data) for _, n in self.model.walk(Path("/")) if isinstance(n, FileNode))

    def _room_for(self, node: FileNode, end: int, path: Path) -> None:
        growth = end - len(node.data)
        if self.capacity is not None and growth > 0 and self.used() + growth > self.capacity:
            raise os_error(errno.ENOSPC, path)

    # --- descriptors ------------------------------------------------------------------------------

    def _open(self, fd: int) -> _Open:
        opened = self._fds.get(fd)
        if opened is None:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        return opened

    def _file(self, fd: int) -> tuple[_Open, FileNode]:
        opened = self._open(fd)
        if not isinstance(opened.node, FileNode):
            raise os_error(errno.EISDIR, opened.path)
        return opened, opened.node

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        path = Path(path)
        node: Node
        if flags & os.O_CREAT:
            node = self.model.create(path, exclusive=bool(flags & os.O_EXCL))
        else:
            found = self.model.lookup(path)
            if found is None:
                raise os_error(errno.ENOENT, path)
            node = found
        if isinstance(node, DirNode) and flags & (os.O_WRONLY | os.O_RDWR):
            raise os_error(errno.EISDIR, path)
        if isinstance(node, FileNode) and flags & os.O_TRUNC and node.data:
            self.model.truncate(node, 0)
        return self._add(_Open(node, path, bool(flags & os.O_APPEND)))

    def _add(self, opened: _Open) -> int:
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = opened
        return fd

    def close(self, fd: int) -> None:
        opened = self._open(fd)
        del self._fds[fd]
        if self._locks.get(opened.path) == fd:
            del self._locks[opened.path]

    def lock(self, path: Path) -> int:
        path = Path(path)
        holder = self._locks.get(path)
        if holder is not None and holder in self._fds:
            raise BlockingIOError(errno.EWOULDBLOCK, f"{path} is locked")
        fd = self.open(path, os.O_RDWR | os.O_CREAT)
        self._locks[path] = fd
        return fd

    def dup(self, fd: int) -> int:
        opened = self._open(fd)
        return self._add(_Open(opened.node, opened.path, opened.append, opened.position))

    def write(self, fd: int, data: Buffer) -> int:
        opened, node = self._file(fd)
        offset = len(node.data) if opened.append else opened.position
        written = self.pwrite(fd, data, offset)
        opened.position = offset + written
        return written

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:
        opened, node = self._file(fd)
        chunk = bytes(data)
        self._room_for(node, offset + len(chunk), opened.path)
        self.model.write(node, offset, chunk)
        return len(chunk)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        _, node = self._file(fd)
        return bytes(node.data[offset : offset + size])

    def fsync(self, fd: int) -> None:
        opened = self._open(fd)
        if self.fail_fsync(opened.path):
            raise os_error(errno.EIO, opened.path)
        self.model.sync(opened.node)

    def ftruncate(self, fd: int, size: int) -> None:
        opened, node = self._file(fd)
        self._room_for(node, size, opened.path)
        self.model.truncate(node, size)

    def fsize(self, fd: int) -> int:
        return len(self._file(fd)[1].data)

    # --- paths ------------------------------------------------------------------------------------

    def size(self, path: Path) -> int:
        return len(self.model.file(path).data)

    def mtime_ms(self, path: Path) -> int:
        return self.model.file(path).mtime_ms

    def truncate(self, path: Path, size: int) -> None:
        node = self.model.file(path)
        self._room_for(node, size, path)
        self.model.truncate(node, size)

    def replace(self, source: Path, target: Path) -> None:
        self.model.rename(source, target)

    def unlink(self, path: Path) -> None:
        self.model.unlink(path)

    def mkdir(self, path: Path) -> None:
        self.model.mkdir(path)

    def rmtree(self, path: Path) -> None:
        if isinstance(self.model.lookup(path), DirNode):
            self.model.rmtree(path)

    def listdir(self, path: Path) -> list[str]:
        return list(self.model.directory(path).entries)

    def exists(self, path: Path) -> bool:
        return self.model.lookup(path) is not None

    def is_dir(self, path: Path) -> bool:
        return isinstance(self.model.lookup(path), DirNode)

    def read_file(self, path: Path) -> bytes:
        return bytes(self.model.file(path).data)
