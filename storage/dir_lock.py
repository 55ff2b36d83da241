"""One process per data directory: the `.lock` file, as Kafka's `FileLock` holds it.

Layout: `<dir>/.lock`, an empty file; the lock is an exclusive `flock` on it, held for the
process's life. The file itself carries nothing: it is created if missing and never removed
(removing it would let a second process lock a new inode while the first still runs).

Crash recovery: the kernel drops an `flock` when its holder dies, so a `kill -9` leaves a
`.lock` file that the next start locks at once; nothing to clean up.
"""

from __future__ import annotations

from pathlib import Path

from strom.storage import disk

LOCK_FILE = ".lock"


class DirectoryLockedError(Exception):
    """Another process holds the directory's lock."""

    def __init__(self, directory: Path) -> None:
        super().__init__(
            f"{directory} is in use by another process (it holds {directory / LOCK_FILE}): "
            "stop that broker, or give this one other log.dirs / metadata.log.dir"
        )
        self.directory = directory


class DirectoryLock:
    """Exclusive locks on a set of directories (created if missing), released by `release()`."""

    def __init__(self, directories: list[Path]) -> None:
        self._fds: list[int] = []
        try:
            for directory in dict.fromkeys(d.resolve() for d in directories):
                self._fds.append(_lock(directory))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        while self._fds:
            disk.close(self._fds.pop())  # closing the fd drops its lock


def _lock(directory: Path) -> int:
    disk.makedirs(directory)
    try:
        return disk.lock(directory / LOCK_FILE)
    except BlockingIOError:
        raise DirectoryLockedError(directory) from None
