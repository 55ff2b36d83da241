"""One simulated process: the `strom.broker.runtime.Runtime` a simulated broker or client runs
on, and the disk every node shares.

- **Clocks.** The monotonic clock is trio's (a `MockClock` that jumps to the next timer when
  every task waits). The wall clock is that plus the node's skew: an offset (a badly set
  clock) and a drift (a clock running fast or slow), drawn from the seed.
- **Worker threads** run inline: the call and a seeded disk latency, in either order (the
  thread ran before or after the event loop's other work; storage's locks make both legal).
  Like `trio.to_thread.run_sync`, the wait is not cancellable.
- **Randomness** and UUIDs come from the node's generator, seeded from the simulation's.
- **A crash** (`kill`): the process is gone at once. Its sockets reset (`SimNetwork`), and
  its disk calls fail (`SimDisk`): the task tree that is then cancelled may run cleanup
  (`finally:` blocks, shielded shutdown steps), but none of it reaches the disk or the network,
  as none of a killed process's would.
"""

from __future__ import annotations

import errno
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, TypeVarTuple

import trio

from strom.broker import runtime
from strom.broker.runtime import Runtime
from strom.storage.disk.memory import MemoryDisk
from strom.storage.disk.model import DiskModel, FileNode, os_error
from strom.wire.primitives import Buffer
from tests.simulation.network import NodeNetwork, SimNetwork, _Life, new_life

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

EPOCH_MS = 1_798_761_600_000
"""The wall clock's zero: 2027-01-01T00:00:00Z (a fixed date: record timestamps replay)."""


@dataclass
class Skew:
    """A node's wall clock: off by `offset_ms` and running `drift` fast (negative: slow)."""

    offset_ms: int = 0
    drift: float = 0.0


class SimRuntime(Runtime):
    """The machine one incarnation of a simulated process runs on."""

    def __init__(
        self,
        name: str,
        net: SimNetwork,
        rng: random.Random,
        *,
        skew: Skew | None = None,
        disk_latency: Callable[[random.Random], float] = lambda _rng: 0.0,
        root: Path | None = None,
    ) -> None:
        self.life: _Life = new_life(name)
        super().__init__(NodeNetwork(net, self.life))
        self.name = name
        self.rng = rng
        self.random = random.Random(rng.getrandbits(64))
        self.skew = skew or Skew()
        self.disk_latency = disk_latency
        self.root = root
        """The directory this process's files live under (None: it has none)."""

    @property
    def alive(self) -> bool:
        return self.life.alive

    def wall_clock_ms(self) -> int:
        now = trio.current_time()
        return EPOCH_MS + self.skew.offset_ms + int(now * 1000 * (1.0 + self.skew.drift))

    def monotonic_ms(self) -> int:
        return int(trio.current_time() * 1000 + 1e-6)  # see RaftDriver.now

    async def to_thread(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        latency = self.disk_latency(self.rng)
        before = self.rng.random() < 0.5
        with trio.CancelScope(shield=True):
            if before:
                await trio.sleep(latency)
            self._require_alive()
            result = fn(*args)
            if not before:
                await trio.sleep(latency)
        self._require_alive()
        return result

    def _require_alive(self) -> None:
        if not self.life.alive:
            raise OSError(errno.EIO, f"{self.name} was killed")

    def new_random(self) -> random.Random:
        return random.Random(self.rng.getrandbits(64))

    def new_uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)


class SimDisk(MemoryDisk):
    """The cluster's one disk (every node's files under its own directory), which refuses the
    calls of a process that was killed and of a process reaching outside its directory."""

    def __init__(self, clock: Callable[[], int]) -> None:
        super().__init__(DiskModel(clock))
        self.calls = 0
        self.failing_fsync: set[Path] = set()
        """Node directories where every fsync fails (EIO)."""
        self.full: set[Path] = set()
        """Node directories where every write that grows a file fails (ENOSPC)."""
        self.fail_fsync = lambda path: _under(path, self.failing_fsync)

    def _room_for(self, node: FileNode, end: int, path: Path) -> None:
        if end > len(node.data) and _under(path, self.full):
            raise os_error(errno.ENOSPC, path)

    def _check(self, path: Path | None = None) -> None:
        self.calls += 1
        current = runtime.current()
        if not isinstance(current, SimRuntime):
            return  # the simulation itself (formatting, checking)
        if not current.alive:
            raise OSError(errno.EIO, f"{current.name} was killed")
        root = current.root
        outside = path is not None and root is not None and root not in path.parents
        if outside and path != root:
            raise AssertionError(f"{current.name} reached outside its directory: {path}")

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        self._check(Path(path))
        return super().open(path, flags, mode)

    def close(self, fd: int) -> None:
        # closing always works (a killed process's descriptors die with it)
        if fd in self._fds:
            super().close(fd)

    def write(self, fd: int, data: Buffer) -> int:
        self._check()
        return super().write(fd, data)

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:
        self._check()
        return super().pwrite(fd, data, offset)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        self._check()
        return super().pread(fd, size, offset)

    def fsync(self, fd: int) -> None:
        self._check()
        super().fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self._check()
        super().ftruncate(fd, size)

    def truncate(self, path: Path, size: int) -> None:
        self._check(Path(path))
        super().truncate(path, size)

    def replace(self, source: Path, target: Path) -> None:
        self._check(Path(target))
        super().replace(source, target)

    def unlink(self, path: Path) -> None:
        self._check(Path(path))
        super().unlink(path)

    def mkdir(self, path: Path) -> None:
        self._check(Path(path))
        super().mkdir(path)

    def rmtree(self, path: Path) -> None:
        self._check(Path(path))
        super().rmtree(path)

    def listdir(self, path: Path) -> list[str]:
        self._check(Path(path))
        return sorted(super().listdir(path))

    def read_file(self, path: Path) -> bytes:
        self._check(Path(path))
        return super().read_file(path)

    def close_all(self, under: Path) -> None:
        """A process under `under` died: its descriptors close (its page cache stays)."""
        for fd, opened in list(self._fds.items()):
            if opened.path == under or under in opened.path.parents:
                del self._fds[fd]


def _under(path: Path, roots: set[Path]) -> bool:
    return bool(roots) and any(root in path.parents for root in roots)
