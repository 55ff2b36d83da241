"""A real, tiny filesystem for full-disk tests: a tmpfs of a few hundred KiB mounted on a
temporary directory. Mounting needs root (CAP_SYS_ADMIN): elsewhere the tests fail and say so
(a prerequisite that is missing fails the suite rather than hiding behind a skip)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_filesystem(path: Path, size: str = "512k") -> Iterator[Path]:
    """Mount a tmpfs of `size` on `path` for the duration of the block."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"cannot mount a tmpfs here: run the tests as root (CAP_SYS_ADMIN): "
            f"{mounted.stderr.strip()}",
            pytrace=False,
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(path: Path) -> Path:
    """Write a filler file into `path` until the filesystem is full; returns it (delete it
    to free the space)."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        chunk = b"\0" * 4096
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return filler
