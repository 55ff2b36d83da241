"""DiskModel and MemoryDisk: what a power cut keeps, and the failures a simulated disk offers."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.storage.disk.memory import MemoryDisk
from strom.storage.disk.model import DiskModel

ROOT = Path("/node")


def _disk() -> MemoryDisk:
    disk = MemoryDisk()
    disk.mkdir(ROOT)
    fd = disk.open(Path("/"), os.O_RDONLY)
    disk.fsync(fd)
    disk.close(fd)
    return disk


def _sync_dir(disk: MemoryDisk, path: Path) -> None:
    fd = disk.open(path, os.O_RDONLY)
    disk.fsync(fd)
    disk.close(fd)


def test_synced_bytes_and_names_survive_and_nothing_else_with_keep_none() -> None:
    disk = _disk()
    fd = disk.open(ROOT / "a", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    disk.write(fd, b"hello ")
    disk.fsync(fd)
    disk.write(fd, b"world")
    unsynced_name = disk.open(ROOT / "b", os.O_WRONLY | os.O_CREAT)
    disk.write(unsynced_name, b"x")
    disk.fsync(unsynced_name)  # its bytes, not its name
    disk.power_cut(random.Random(1), ROOT, keep="none")
    assert not disk.exists(ROOT / "a")  # the directory was never synced: no name survives
    disk = _disk()
    fd = disk.open(ROOT / "a", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    disk.write(fd, b"hello ")
    disk.fsync(fd)
    _sync_dir(disk, ROOT)
    disk.write(fd, b"world")
    disk.power_cut(random.Random(1), ROOT, keep="none")
    assert disk.read_file(ROOT / "a") == b"hello "
    with pytest.raises(OSError, match="Bad file descriptor") as failed:
        disk.write(fd, b"!")  # the process died with the power
    assert failed.value.errno == errno.EBADF


def test_a_rename_survives_whole_or_not_at_all() -> None:
    for seed in range(40):
        disk = _disk()
        fd = disk.open(ROOT / "f", os.O_WRONLY | os.O_CREAT)
        disk.write(fd, b"old")
        disk.fsync(fd)
        disk.close(fd)
        _sync_dir(disk, ROOT)
        fd = disk.open(ROOT / "f.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        disk.write(fd, b"new")
        disk.fsync(fd)
        disk.close(fd)
        disk.replace(ROOT / "f.tmp", ROOT / "f")
        disk.power_cut(random.Random(seed), ROOT)
        assert disk.read_file(ROOT / "f") in (b"old", b"new")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.binary(min_size=1, max_size=20), st.booleans()), max_size=15),
    st.integers(0, 2**32),
)
def test_a_power_cut_keeps_every_synced_byte_and_invents_none(
    writes: list[tuple[bytes, bool]], seed: int
) -> None:
    """An append-only file: after any power cut it holds at least what its last fsync did,
    and every byte it holds up to what was written is the byte written there (or a zero
    where a torn write's size landed without its data)."""
    disk = _disk()
    fd = disk.open(ROOT / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    _sync_dir(disk, ROOT)
    written, synced = b"", b""
    for chunk, sync in writes:
        disk.write(fd, chunk)
        written += chunk
        if sync:
            disk.fsync(fd)
            synced = written
    disk.power_cut(random.Random(seed), ROOT)
    after = disk.read_file(ROOT / "log")
    assert after[: len(synced)] == synced
    assert len(after) <= len(written)
    for index, byte in enumerate(after[len(synced) :], start=len(synced)):
        assert byte in (written[index], 0)


def test_a_full_disk_refuses_and_changes_nothing() -> None:
    disk = _disk()
    disk.capacity = 10
    fd = disk.open(ROOT / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    disk.write(fd, b"12345678")
    with pytest.raises(OSError, match="No space left") as full:
        disk.write(fd, b"abc")
    assert full.value.errno == errno.ENOSPC
    assert disk.read_file(ROOT / "f") == b"12345678"


def test_a_failing_fsync_syncs_nothing() -> None:
    disk = _disk()
    disk.fail_fsync = lambda path: path.name == "f"
    fd = disk.open(ROOT / "f", os.O_WRONLY | os.O_CREAT)
    disk.write(fd, b"data")
    with pytest.raises(OSError, match="Input/output error") as failed:
        disk.fsync(fd)
    assert failed.value.errno == errno.EIO
    assert disk.model.file(ROOT / "f").synced == b""


def test_a_power_cut_of_one_subtree_leaves_the_others_alone() -> None:
    disk = _disk()
    for node in ("n1", "n2"):
        disk.mkdir(ROOT / node)
        fd = disk.open(ROOT / node / "f", os.O_WRONLY | os.O_CREAT)
        disk.write(fd, b"unsynced")
    disk.power_cut(random.Random(0), ROOT / "n1", keep="none")
    assert not disk.exists(ROOT / "n1" / "f")
    assert disk.read_file(ROOT / "n2" / "f") == b"unsynced"


def test_baseline_files_are_durable() -> None:
    model = DiskModel()
    model.baseline(Path("/a/b/c"), b"data")
    model.crash(random.Random(0), Path("/"), keep="none")
    assert bytes(model.file(Path("/a/b/c")).data) == b"data"
