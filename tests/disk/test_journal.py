"""JournalingDisk + power_cut: a real directory left as a power loss would leave it."""

from __future__ import annotations

import os
import random
from pathlib import Path

from strom.storage import disk
from strom.storage.disk.journal import JournalingDisk, power_cut, replay
from strom.storage.disk.model import FileNode


def _write(journaled: JournalingDisk, path: Path, data: bytes, *, sync: bool) -> None:
    fd = journaled.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        journaled.write(fd, data)
        if sync:
            journaled.fsync(fd)
    finally:
        journaled.close(fd)


def test_a_power_cut_keeps_what_was_synced_and_drops_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "node"
    (root / "data").mkdir(parents=True)
    (root / "data" / "old").write_bytes(b"before the journal")  # durable: the baseline
    journal = tmp_path / "node.journal"
    journaled = JournalingDisk(journal, root)
    _write(journaled, root / "data" / "old", b" + unsynced", sync=False)
    _write(journaled, root / "data" / "synced", b"synced", sync=True)
    previous = disk.use(journaled)
    try:
        disk.fsync_path(root / "data")  # the new name is durable too
        disk.makedirs(root / "data" / "new-dir")
    finally:
        disk.use(previous)
    _write(journaled, root / "data" / "synced", b" + unsynced", sync=False)
    _write(journaled, root / "data" / "new-dir" / "f", b"never synced", sync=True)
    assert (root / "data" / "synced").read_bytes() == b"synced + unsynced"  # the page cache
    summary = power_cut(journal, root, random.Random(0), keep="none")
    assert "power cut" in summary
    assert (root / "data" / "old").read_bytes() == b"before the journal"
    assert (root / "data" / "synced").read_bytes() == b"synced"
    assert not (root / "data" / "new-dir").exists()  # its parent was not synced after mkdir
    assert not journal.exists()  # the next process journals afresh


def test_a_restarted_process_continues_the_journal(tmp_path: Path) -> None:
    """kill -9 keeps the page cache and the journal: the next process appends to it, and what
    the first one synced stays synced."""
    root = tmp_path / "node"
    root.mkdir()
    journal = tmp_path / "j"
    first = JournalingDisk(journal, root)
    _write(first, root / "f", b"one", sync=True)
    previous = disk.use(first)
    try:
        disk.fsync_path(root)
    finally:
        disk.use(previous)
    second = JournalingDisk(journal, root)  # the restart: no second baseline
    _write(second, root / "f", b"two", sync=False)
    model, skipped = replay(journal)
    node = model.lookup(root / "f")
    assert isinstance(node, FileNode)
    assert (bytes(node.synced), bytes(node.data), skipped) == (b"one", b"onetwo", 0)
    power_cut(journal, root, random.Random(3))
    assert (root / "f").read_bytes() in (b"one", b"onet", b"onetw", b"onetwo", b"one\0\0\0",
                                          b"onet\0\0", b"onetw\0")  # fmt: skip


def test_renames_and_unlinks_follow_the_directory_sync(tmp_path: Path) -> None:
    root = tmp_path / "node"
    root.mkdir()
    journal = tmp_path / "j"
    journaled = JournalingDisk(journal, root)
    previous = disk.use(journaled)
    try:
        fd = disk.open(root / "f.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        disk.write_all(fd, b"v1")
        disk.fsync(fd)
        disk.close(fd)
        disk.replace(root / "f.tmp", root / "f")
        disk.fsync_path(root)
        disk.unlink(root / "f")  # not synced: comes back
    finally:
        disk.use(previous)
    power_cut(journal, root, random.Random(0), keep="none")
    assert (root / "f").read_bytes() == b"v1"
    assert not (root / "f.tmp").exists()
