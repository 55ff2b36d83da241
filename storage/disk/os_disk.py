"""`OsDisk`: the `Disk` interface straight onto the kernel (what a broker uses)."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from strom.storage.disk.interface import Disk
from strom.wire.primitives import Buffer


class OsDisk(Disk):
    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def dup(self, fd: int) -> int:
        return os.dup(fd)

    def write(self, fd: int, data: Buffer) -> int:
        return os.write(fd, data)

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def lock(self, path: Path) -> int:
        fd = self.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            self.close(fd)
            raise
        return fd

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def size(self, path: Path) -> int:
        return os.stat(path).st_size

    def mtime_ms(self, path: Path) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def truncate(self, path: Path, size: int) -> None:
        os.truncate(path, size)

    def replace(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def mkdir(self, path: Path) -> None:
        os.mkdir(path)

    def rmtree(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def listdir(self, path: Path) -> list[str]:
        return os.listdir(path)

    def exists(self, path: Path) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: Path) -> bool:
        return os.path.isdir(path)

    def read_file(self, path: Path) -> bytes:
        with open(path, "rb") as handle:
            return handle.read()
