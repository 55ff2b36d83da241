"""A power cut for a real process's disk: `JournalingDisk` records, `power_cut` replays.

A test cannot cut the power of one process: `kill -9` keeps the page cache, so everything the
process wrote survives whether it was synced or not. Instead the process runs on a
`JournalingDisk` (the kernel's disk, `OsDisk`, that also appends every change under its root
directory to a journal file outside it), and after the process is killed `power_cut` replays
the journal into a `DiskModel`, cuts the model's power (what was not fsynced is lost, partly
or wholly, the last write maybe torn: see model.py) and writes what survives back over the
root. The next start finds exactly what a power loss would have left.

`strom serve` runs on one when `STROM_DISK_JOURNAL` names a journal file and
`STROM_DISK_JOURNAL_ROOT` the directory it covers (the node's data and metadata
directories); `ClusterProcess(power_cuts=True)` sets both and `ClusterNode.power_cut()` cuts.

Journal layout: records back to back, each
`length u32 | op u8 | path length u16 | path (UTF-8) | op data` (little-endian; `length`
counts what follows it):

| op | data | meaning |
|---|---|---|
| 1 BASE_DIR | - | a directory present when the journal began (durable) |
| 2 BASE_FILE | the file's bytes | a file present when the journal began (durable) |
| 3 CREATE | - | an open with O_CREAT created the file |
| 4 WRITE | offset u64, bytes | written at offset |
| 5 TRUNCATE | size u64 | truncated (or extended) to size; O_TRUNC is size 0 |
| 6 FSYNC | - | fsync of the file or directory returned |
| 7 RENAME | target path length u16, target path | os.replace |
| 8 UNLINK | - | unlink |
| 9 MKDIR | - | mkdir |
| 10 RMTREE | - | a directory removed with everything under it |
| 11 SIZE | size u64 | the file holds `size` bytes now (the first open of a file by a process: see below) |

Crash rules. The journal is written to the page cache like everything else (a kill -9 keeps
it; the power cut is simulated, so the journal itself never loses anything), without fsync. A
change is journaled before it is made (so a process killed in between has the change in the
journal but not on disk), except that an fsync is journaled after it returned (a kill in
between leaves it unsynced: as if the kill came first) and a file created by `open` is
journaled after the open. A process starting again on the same journal journals, at its first
open of each existing file, the file's real length (SIZE): that reconciles a write the
journal holds but the killed process never made. A truncated last record (a kill during the
append) is ignored. Replay skips a change it cannot apply (a rename of a missing file, say),
as the kernel would have refused it. Writes through a descriptor whose file was unlinked or
renamed out of the root meanwhile are not journaled (they cannot reach the files a power cut
keeps). `power_cut` starts the journal afresh: the next process journals the tree as it is.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

from strom.storage.disk.model import DirNode, DiskModel, FileNode, Keep
from strom.storage.disk.os_disk import OsDisk
from strom.wire.primitives import Buffer

log = logging.getLogger("strom.storage.disk")

JOURNAL_ENV = "STROM_DISK_JOURNAL"
ROOT_ENV = "STROM_DISK_JOURNAL_ROOT"

BASE_DIR, BASE_FILE, CREATE, WRITE, TRUNCATE, FSYNC, RENAME, UNLINK, MKDIR, RMTREE, SIZE = range(
    1, 12
)
_HEAD = struct.Struct("<IBH")
_U64 = struct.Struct("<Q")
_U16 = struct.Struct("<H")


def _absolute(path: Path | str) -> Path:
    return Path(os.path.abspath(path))


class JournalingDisk(OsDisk):
    """The kernel's disk, journaling every change under `root` to `journal` (see above)."""

    def __init__(self, journal: Path, root: Path) -> None:
        self.journal = _absolute(journal)
        self.root = _absolute(root)
        if self.root == self.journal or self.root in self.journal.parents:
            raise ValueError(f"the journal {journal} must be outside the directory it covers")
        self._lock = threading.Lock()
        self._paths: dict[int, Path] = {}
        """Descriptor -> the journaled file it is open on (files under the root only)."""
        self._append: set[int] = set()
        self._reconciled: set[Path] = set()
        fresh = not self.journal.exists() or self.journal.stat().st_size == 0
        self._out = os.open(self.journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if fresh:
            self._baseline()

    def _ours(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def _record(self, op: int, path: Path, data: bytes = b"") -> None:
        name = str(path).encode()
        head = _HEAD.pack(1 + 2 + len(name) + len(data), op, len(name))
        os.write(self._out, head + name + data)

    def _baseline(self) -> None:
        with self._lock:
            if not self.root.is_dir():
                return
            for directory, dirs, files in os.walk(self.root):
                here = Path(directory)
                self._record(BASE_DIR, here)
                dirs.sort()
                for name in sorted(files):
                    path = here / name
                    try:
                        data = path.read_bytes()
                    except OSError:  # gone meanwhile, or not readable: not ours to keep
                        continue
                    self._record(BASE_FILE, path, data)

    # --- descriptors ------------------------------------------------------------------------------

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        where = _absolute(path)
        if not self._ours(where):
            return os.open(path, flags, mode)
        with self._lock:
            existed = os.path.exists(where)
            fd = os.open(path, flags, mode)
            if os.path.isdir(where):
                self._paths[fd] = where
                return fd
            if not existed:
                self._record(CREATE, where)
            elif flags & os.O_TRUNC:
                self._record(TRUNCATE, where, _U64.pack(0))
            elif where not in self._reconciled:
                self._record(SIZE, where, _U64.pack(os.fstat(fd).st_size))
            self._reconciled.add(where)
            self._paths[fd] = where
            if flags & os.O_APPEND:
                self._append.add(fd)
            return fd

    def close(self, fd: int) -> None:
        with self._lock:
            self._paths.pop(fd, None)
            self._append.discard(fd)
        os.close(fd)

    def dup(self, fd: int) -> int:
        with self._lock:
            new = os.dup(fd)
            path = self._paths.get(fd)
            if path is not None:
                self._paths[new] = path
                if fd in self._append:
                    self._append.add(new)
            return new

    def write(self, fd: int, data: Buffer) -> int:
        with self._lock:
            path = self._paths.get(fd)
            if path is None:
                return os.write(fd, data)
            offset = os.fstat(fd).st_size if fd in self._append else os.lseek(fd, 0, os.SEEK_CUR)
            return self._write(path, fd, data, offset, positioned=False)

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:
        with self._lock:
            path = self._paths.get(fd)
            if path is None:
                return os.pwrite(fd, data, offset)
            return self._write(path, fd, data, offset, positioned=True)

    def _write(self, path: Path, fd: int, data: Buffer, offset: int, *, positioned: bool) -> int:
        chunk = bytes(data)
        self._record(WRITE, path, _U64.pack(offset) + chunk)
        try:
            written = os.pwrite(fd, chunk, offset) if positioned else os.write(fd, chunk)
        except OSError:
            self._record(SIZE, path, _U64.pack(os.fstat(fd).st_size))
            raise
        if written < len(chunk):
            self._record(SIZE, path, _U64.pack(os.fstat(fd).st_size))
        return written

    def fsync(self, fd: int) -> None:
        os.fsync(fd)
        with self._lock:
            path = self._paths.get(fd)
            if path is not None:
                self._record(FSYNC, path)

    def ftruncate(self, fd: int, size: int) -> None:
        with self._lock:
            path = self._paths.get(fd)
            if path is not None:
                self._record(TRUNCATE, path, _U64.pack(size))
            os.ftruncate(fd, size)

    # --- paths ------------------------------------------------------------------------------------

    def truncate(self, path: Path, size: int) -> None:
        where = _absolute(path)
        with self._lock:
            if self._ours(where):
                self._record(TRUNCATE, where, _U64.pack(size))
            os.truncate(path, size)

    def replace(self, source: Path, target: Path) -> None:
        src, dst = _absolute(source), _absolute(target)
        with self._lock:
            if self._ours(src) and self._ours(dst):
                name = str(dst).encode()
                self._record(RENAME, src, _U16.pack(len(name)) + name)
            elif self._ours(src):
                self._record(UNLINK if os.path.isfile(src) else RMTREE, src)
            os.replace(source, target)
            self._reconciled.discard(src)
            for fd, path in list(self._paths.items()):
                if path == src or src in path.parents:
                    moved = dst / path.relative_to(src)
                    if self._ours(moved):
                        self._paths[fd] = moved
                    else:
                        del self._paths[fd]

    def unlink(self, path: Path) -> None:
        where = _absolute(path)
        with self._lock:
            if self._ours(where):
                self._record(UNLINK, where)
            os.unlink(path)
            self._reconciled.discard(where)
            for fd in [fd for fd, p in self._paths.items() if p == where]:
                del self._paths[fd]

    def mkdir(self, path: Path) -> None:
        where = _absolute(path)
        with self._lock:
            if self._ours(where) and where != self.root:
                self._record(MKDIR, where)
            os.mkdir(path)

    def rmtree(self, path: Path) -> None:
        where = _absolute(path)
        with self._lock:
            if self._ours(where) and where != self.root:
                self._record(RMTREE, where)
            for fd in [fd for fd, p in self._paths.items() if p == where or where in p.parents]:
                del self._paths[fd]
        shutil.rmtree(path, ignore_errors=True)


# --- replay and the power cut ---------------------------------------------------------------------


def records(journal: Path) -> Iterator[tuple[int, Path, bytes]]:
    """(op, path, data) of each whole record in `journal`."""
    with open(journal, "rb") as handle:
        data = handle.read()
    at = 0
    while at + 4 <= len(data):
        (length,) = struct.unpack_from("<I", data, at)
        if at + 4 + length > len(data) or length < 3:
            return  # cut short by a kill
        op, name_length = struct.unpack_from("<BH", data, at + 4)
        start = at + 7
        path = Path(data[start : start + name_length].decode())
        yield op, path, data[start + name_length : at + 4 + length]
        at += 4 + length


def replay(journal: Path) -> tuple[DiskModel, int]:
    """The model the journal describes; and how many changes it skipped (impossible ones)."""
    model = DiskModel()
    skipped = 0
    for op, path, data in records(journal):
        try:
            _apply(model, op, path, data)
        except OSError:
            skipped += 1
    return model, skipped


def _apply(model: DiskModel, op: int, path: Path, data: bytes) -> None:
    if op == BASE_DIR:
        model.baseline(path, None)
    elif op == BASE_FILE:
        model.baseline(path, data)
    elif op == CREATE:
        model.create(path)
    elif op == WRITE:
        (offset,) = _U64.unpack_from(data)
        model.write(model.file(path), offset, data[_U64.size :])
    elif op == TRUNCATE:
        (size,) = _U64.unpack_from(data)
        model.truncate(model.file(path), size)
    elif op == SIZE:
        (size,) = _U64.unpack_from(data)
        created = model.create(path)
        if len(created.data) != size:
            model.truncate(created, size)
    elif op == FSYNC:
        found = model.lookup(path)
        if found is not None:
            model.sync(found)
    elif op == RENAME:
        (length,) = _U16.unpack_from(data)
        model.rename(path, Path(data[2 : 2 + length].decode()))
    elif op == UNLINK:
        model.unlink(path)
    elif op == MKDIR:
        model.mkdir(path)
    elif op == RMTREE:
        model.rmtree(path)
    else:
        raise ValueError(f"journal record of unknown op {op}")


def power_cut(journal: Path, root: Path, rng: random.Random, *, keep: Keep = "random") -> str:
    """Cut the power of the (stopped) process whose `JournalingDisk` journaled `root` into
    `journal`: `root` then holds what a power loss would have left. Returns a one-line
    summary (files kept whole, files that lost unsynced bytes, entries lost)."""
    journal, root = _absolute(journal), _absolute(root)
    model, skipped = replay(journal)
    before = {p: (len(n.data), bytes(n.data)) for p, n in model.walk(root) if isinstance(n, FileNode)}
    model.crash(rng, root, keep=keep)
    after = dict(model.walk(root))
    shortened = sum(
        1 for p, (size, data) in before.items()
        if isinstance(n := after.get(p), FileNode) and bytes(n.data) != data
    )  # fmt: skip
    vanished = sum(1 for p in before if p not in after)
    _materialize(model, root)
    os.unlink(journal)
    return (
        f"power cut of {root}: {len(before) - shortened - vanished} files intact, "
        f"{shortened} lost unsynced bytes, {vanished} lost their unsynced names"
        + (f" ({skipped} journaled changes could not apply)" if skipped else "")
    )


def _materialize(model: DiskModel, root: Path) -> None:
    """Make the real `root` hold exactly the model's tree below it."""
    if root.exists():
        for child in root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    else:
        root.mkdir(parents=True)
    for path, node in model.walk(root):
        if path == root:
            continue
        if isinstance(node, DirNode):
            path.mkdir()
        else:
            path.write_bytes(bytes(node.data))
