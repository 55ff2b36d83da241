"""`DiskModel`: an in-memory file tree that knows what a power cut keeps.

Each file holds its bytes as every reader sees them (`data`), the bytes its last fsync made
durable (`synced`) and, in order, the writes and truncations since (`pending`). Each directory
holds its entries, the entries its last fsync made durable and the creates, renames and
unlinks since. So the model can say, at any moment, what the disk would hold after the power
went out (`crash`):

- a directory keeps its synced entries plus a prefix of its pending changes (none, some or
  all of them, in order: a journaling filesystem commits metadata in order; a rename is one
  change, atomic);
- a file keeps its synced bytes plus a prefix of its pending writes and truncations, and the
  first write past that prefix may be *torn*: a random prefix of its bytes landed, and either
  the file ends there or it is as long as the whole write with zeros where the rest did not
  land (the size reached the disk, the data did not);
- nothing that was synced is lost, and nothing is invented.

`crash(rng)` picks those prefixes at random (`keep="none"`: the strict case, nothing pending
survives); `under` limits it to one subtree (one node of a simulated cluster). Afterwards the
tree is what survived and all of it counts as synced.

Used by the journal's power cut of a real process's directory (`journal.py`, which replays a
journal into a model, crashes it and writes the result back) and by `MemoryDisk` (a disk for
simulations). Paths are absolute `Path`s; `/` always exists.
"""

from __future__ import annotations

import errno
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Keep = Literal["random", "none"]


@dataclass(eq=False)
class FileNode:
    data: bytearray = field(default_factory=bytearray)
    synced: bytes = b""
    pending: list[tuple[int, int, bytes]] = field(default_factory=list)
    """(offset, size, bytes): a write of `bytes` at `offset` (size -1), or a truncation to
    `size` (bytes empty)."""
    mtime_ms: int = 0


@dataclass(eq=False)
class DirNode:
    entries: dict[str, Node] = field(default_factory=dict)
    synced: dict[str, Node] = field(default_factory=dict)
    pending: list[tuple[str, str, Node | None]] = field(default_factory=list)
    """(name, new name or "", node): a link of `node` as `name` (new name "", node set), an
    unlink of `name` (node None), or a rename of `name` to `new name` in this directory."""


Node = FileNode | DirNode


def os_error(code: int, path: Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


class DiskModel:
    """See the module docstring."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self.root = DirNode()
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)

    # --- lookup ---------------------------------------------------------------------------------

    def lookup(self, path: Path) -> Node | None:
        node: Node = self.root
        for part in Path(path).parts[1:]:
            if not isinstance(node, DirNode):
                return None
            found = node.entries.get(part)
            if found is None:
                return None
            node = found
        return node

    def file(self, path: Path) -> FileNode:
        node = self.lookup(path)
        if node is None:
            raise os_error(errno.ENOENT, path)
        if isinstance(node, DirNode):
            raise os_error(errno.EISDIR, path)
        return node

    def directory(self, path: Path) -> DirNode:
        node = self.lookup(path)
        if node is None:
            raise os_error(errno.ENOENT, path)
        if not isinstance(node, DirNode):
            raise os_error(errno.ENOTDIR, path)
        return node

    def _parent(self, path: Path) -> tuple[DirNode, str]:
        path = Path(path)
        if path.parent == path:
            raise os_error(errno.EBUSY, path)
        return self.directory(path.parent), path.name

    # --- changes --------------------------------------------------------------------------------

    def create(self, path: Path, *, exclusive: bool = False) -> FileNode:
        """The file at `path`, created empty if missing (O_CREAT, with O_EXCL: `exclusive`)."""
        parent, name = self._parent(path)
        found = parent.entries.get(name)
        if found is not None:
            if exclusive:
                raise os_error(errno.EEXIST, path)
            if isinstance(found, DirNode):
                raise os_error(errno.EISDIR, path)
            return found
        node = FileNode(mtime_ms=self.clock())
        self._link(parent, name, node)
        return node

    def mkdir(self, path: Path) -> DirNode:
        parent, name = self._parent(path)
        if name in parent.entries:
            raise os_error(errno.EEXIST, path)
        node = DirNode()
        self._link(parent, name, node)
        return node

    def write(self, node: FileNode, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > len(node.data):
            node.data.extend(bytes(end - len(node.data)))
        node.data[offset:end] = data
        node.pending.append((offset, -1, bytes(data)))
        node.mtime_ms = self.clock()

    def truncate(self, node: FileNode, size: int) -> None:
        if size < len(node.data):
            del node.data[size:]
        else:
            node.data.extend(bytes(size - len(node.data)))
        node.pending.append((0, size, b""))
        node.mtime_ms = self.clock()

    def sync(self, node: Node) -> None:
        if isinstance(node, FileNode):
            node.synced = bytes(node.data)
        else:
            node.synced = dict(node.entries)
        node.pending.clear()

    def rename(self, source: Path, target: Path) -> None:
        """os.replace: `target` (a file, or an empty directory) is replaced atomically."""
        src_dir, src_name = self._parent(source)
        node = src_dir.entries.get(src_name)
        if node is None:
            raise os_error(errno.ENOENT, source)
        dst_dir, dst_name = self._parent(target)
        old = dst_dir.entries.get(dst_name)
        if old is not None and old is not node:
            if isinstance(old, DirNode) != isinstance(node, DirNode):
                raise os_error(errno.EISDIR if isinstance(old, DirNode) else errno.ENOTDIR, target)
            if isinstance(old, DirNode) and old.entries:
                raise os_error(errno.ENOTEMPTY, target)
        if src_dir is dst_dir:
            if src_name == dst_name:
                return
            del src_dir.entries[src_name]
            src_dir.entries[dst_name] = node
            src_dir.pending.append((src_name, dst_name, node))
        else:  # two directories: each commits its half on its own
            self._unlink(src_dir, src_name)
            self._link(dst_dir, dst_name, node)

    def unlink(self, path: Path) -> None:
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise os_error(errno.ENOENT, path)
        if isinstance(node, DirNode):
            raise os_error(errno.EISDIR, path)
        self._unlink(parent, name)

    def rmtree(self, path: Path) -> None:
        """Remove a directory with everything under it (one change of its parent)."""
        parent, name = self._parent(path)
        if name in parent.entries:
            self._unlink(parent, name)

    def _link(self, parent: DirNode, name: str, node: Node) -> None:
        parent.entries[name] = node
        parent.pending.append((name, "", node))

    def _unlink(self, parent: DirNode, name: str) -> None:
        del parent.entries[name]
        parent.pending.append((name, "", None))

    # --- what was there before anyone looked ------------------------------------------------------

    def baseline(self, path: Path, data: bytes | None) -> None:
        """`path` exists, durably: a directory (`data` None) or a file holding `data`; missing
        parent directories are made, durably, too."""
        path = Path(path)
        parent: DirNode = self.root
        for part in path.parent.parts[1:]:
            found = parent.entries.get(part)
            if not isinstance(found, DirNode):
                found = DirNode()
                parent.entries[part] = parent.synced[part] = found
            parent = found
        if path.parent == path:
            return
        node: Node
        if data is None:
            existing = parent.entries.get(path.name)
            node = existing if isinstance(existing, DirNode) else DirNode()
        else:
            node = FileNode(bytearray(data), bytes(data), mtime_ms=self.clock())
        parent.entries[path.name] = parent.synced[path.name] = node

    # --- power cut --------------------------------------------------------------------------------

    def crash(self, rng: random.Random, under: Path = Path("/"), *, keep: Keep = "random") -> None:
        """Cut the power of the subtree `under` (see the module docstring)."""
        node = self.lookup(under)
        if node is None:
            return
        seen: set[int] = set()
        self._crash(node, rng, keep, seen)

    def _crash(self, node: Node, rng: random.Random, keep: Keep, seen: set[int]) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, FileNode):
            node.data = bytearray(_surviving_bytes(node, rng, keep))
            node.synced = bytes(node.data)
            node.pending.clear()
            return
        entries = dict(node.synced)
        count = len(node.pending) if keep == "random" else 0
        for name, new_name, target in node.pending[: rng.randint(0, count) if count else 0]:
            if new_name:  # a rename in this directory
                moved = entries.pop(name, None)
                if moved is not None:
                    entries[new_name] = moved
            elif target is None:
                entries.pop(name, None)
            else:
                entries[name] = target
        node.entries, node.synced = entries, dict(entries)
        node.pending.clear()
        for child in entries.values():
            self._crash(child, rng, keep, seen)

    # --- reading the tree ---------------------------------------------------------------------------

    def walk(self, under: Path) -> Iterator[tuple[Path, Node]]:
        """Every (path, node) at and below `under`, parents before children."""
        node = self.lookup(under)
        if node is None:
            return
        stack: list[tuple[Path, Node]] = [(Path(under), node)]
        while stack:
            path, node = stack.pop()
            yield path, node
            if isinstance(node, DirNode):
                stack.extend((path / name, child) for name, child in sorted(node.entries.items()))


def _surviving_bytes(node: FileNode, rng: random.Random, keep: Keep) -> bytes:
    if keep == "none" or not node.pending:
        return node.synced
    data = bytearray(node.synced)
    kept = rng.randint(0, len(node.pending))
    for offset, size, chunk in node.pending[:kept]:
        _apply(data, offset, size, chunk)
    if kept < len(node.pending):
        offset, size, chunk = node.pending[kept]
        if size < 0 and chunk and rng.random() < 0.5:  # the next write, torn
            landed = rng.randrange(len(chunk))
            rest = len(chunk) - landed if rng.random() < 0.5 else 0
            if landed or rest:
                _apply(data, offset, -1, chunk[:landed] + bytes(rest))
    return bytes(data)


def _apply(data: bytearray, offset: int, size: int, chunk: bytes) -> None:
    if size >= 0:
        if size < len(data):
            del data[size:]
        else:
            data.extend(bytes(size - len(data)))
        return
    end = offset + len(chunk)
    if end > len(data):
        data.extend(bytes(end - len(data)))
    data[offset:end] = chunk
