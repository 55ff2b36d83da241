"""The Raft log's segments on disk: roll, retention, reset, torn-tail recovery, and appends the
disk refuses (the metadata log of every node, the single node's one-voter quorum included)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typing_extensions import Buffer

from strom.storage.raft.raft_log import (
    EncodedEntries,
    RaftLogDir,
    RaftLogError,
    decode_entries,
    encode_entries,
    segment_name,
)
from strom.storage.raft.raft_store import Entry
from tests.tinyfs import fill, tiny_filesystem


def _entries(first: int, count: int, epoch: int = 1, size: int = 2) -> list[Entry]:
    return [Entry(first + i, epoch, b"%0*d" % (size, first + i)) for i in range(count)]


def _fill(log: RaftLogDir, count: int, *, per_batch: int = 2) -> None:
    start = log.end_offset
    for i in range(start, start + count, per_batch):
        log.append(_entries(i, min(per_batch, start + count - i)))


def _offsets(log: RaftLogDir) -> list[int]:
    return [e.offset for e in log.read_all()]


def _segment(directory: Path) -> Path:
    return directory / segment_name(0)


def test_segments_roll_and_old_ones_are_deleted(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path, segment_bytes=300)
    _fill(log, 20)
    paths = sorted(tmp_path.glob("*.log"))
    assert len(paths) > 2
    log = RaftLogDir.open(tmp_path, segment_bytes=300)
    assert sorted(tmp_path.glob("*.log")) == paths
    assert _offsets(log) == list(range(20))
    log.delete_before(12)
    assert 0 < log.start_offset <= 12
    assert log.end_offset == 20
    log.delete_before(10_000)
    assert len(list(tmp_path.glob("*.log"))) == 1  # the active segment always stays


def test_reset_continues_at_offset(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 4)
    log.reset(50)
    assert (log.start_offset, log.end_offset) == (50, 50)
    log.append(_entries(50, 1))
    assert _offsets(RaftLogDir.open(tmp_path)) == [50]


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 60, 61, -1])
def test_torn_tail_is_truncated(tmp_path: Path, cut: int) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 4)
    path = _segment(tmp_path)
    good = path.read_bytes()
    torn = encode_entries(_entries(4, 2))
    path.write_bytes(good + torn[:cut])
    log = RaftLogDir.open(tmp_path)
    assert path.read_bytes() == good
    assert log.end_offset == 4
    log.append(_entries(4, 1, epoch=2))  # appends continue cleanly
    assert _offsets(RaftLogDir.open(tmp_path)) == [0, 1, 2, 3, 4]


def test_bad_crc_in_last_batch_is_truncated(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 6)
    path = _segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x55  # inside the last batch's records
    path.write_bytes(bytes(data))
    assert RaftLogDir.open(tmp_path).end_offset == 4


def test_garbage_after_valid_batches_is_truncated(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 2)
    path = _segment(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good + b"\x00" * 100)  # e.g. preallocated, never written
    log = RaftLogDir.open(tmp_path)
    assert (log.end_offset, path.read_bytes()) == (2, good)


def test_gap_between_segments_refuses_to_open(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 2)
    (tmp_path / segment_name(7)).write_bytes(b"")
    with pytest.raises(RaftLogError, match="expected 2"):
        RaftLogDir.open(tmp_path)


def test_stray_file_refuses_to_open(tmp_path: Path) -> None:
    (tmp_path / "junk.log").write_bytes(b"")
    with pytest.raises(RaftLogError, match="unexpected file"):
        RaftLogDir.open(tmp_path)


def test_failed_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 2)
    size = _segment(tmp_path).stat().st_size

    def boom(fd: int) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr("strom.storage.raft.raft_log.os.fsync", boom)
    with pytest.raises(OSError, match="fire"):
        log.append(_entries(2, 1))
    monkeypatch.undo()
    assert (log.end_offset, _segment(tmp_path).stat().st_size) == (2, size)
    log.append(_entries(2, 1, epoch=2))
    assert RaftLogDir.open(tmp_path).read_all() == [*_entries(0, 2), *_entries(2, 1, epoch=2)]


def _partial_then_enospc(real: Callable[[int, Buffer, int], int]) -> Callable[..., int]:
    """An os.pwrite that writes half of its first call, then fails with ENOSPC (a disk
    filling up mid-batch)."""
    calls = {"n": 0}

    def pwrite(fd: int, data: Buffer, position: int) -> int:
        calls["n"] += 1
        view = memoryview(data)
        if calls["n"] == 1 and len(view) > 1:
            return real(fd, view[: len(view) // 2], position)
        raise OSError(errno.ENOSPC, "No space left on device")

    return pwrite


def test_failed_write_is_never_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 2)
    size = _segment(tmp_path).stat().st_size
    monkeypatch.setattr(os, "pwrite", _partial_then_enospc(os.pwrite))
    with pytest.raises(OSError, match="No space left") as info:
        log.append(_entries(2, 1))
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert (log.end_offset, _segment(tmp_path).stat().st_size) == (2, size)
    log.append(_entries(2, 2, epoch=2))
    again = RaftLogDir.open(tmp_path)
    assert "torn tail" not in caplog.text
    assert again.read_all() == [*_entries(0, 2), *_entries(2, 2, epoch=2)]


def test_a_failed_cut_back_is_repeated_before_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = RaftLogDir.open(tmp_path)
    _fill(log, 2)
    size = _segment(tmp_path).stat().st_size

    def no_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pwrite", _partial_then_enospc(os.pwrite))
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError, match="No space left"):
        log.append(_entries(2, 20))
    monkeypatch.undo()
    assert _segment(tmp_path).stat().st_size > size  # half a batch is still there
    log.append(_entries(2, 1, epoch=2))
    assert RaftLogDir.open(tmp_path).read_all() == [*_entries(0, 2), *_entries(2, 1, epoch=2)]


def test_a_failed_roll_leaves_no_segment_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = RaftLogDir.open(tmp_path, segment_bytes=1)
    _fill(log, 2)
    before = sorted(tmp_path.glob("*.log"))

    def no_dir_sync(path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("strom.storage.raft.raft_log.fsync_dir", no_dir_sync)
    with pytest.raises(OSError, match="No space left"):
        log.append(_entries(2, 1))
    monkeypatch.undo()
    assert sorted(tmp_path.glob("*.log")) == before
    log.append(_entries(2, 1))
    assert _offsets(RaftLogDir.open(tmp_path)) == [0, 1, 2]


def test_a_full_filesystem_refuses_the_batch_and_then_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with tiny_filesystem(tmp_path / "tiny") as root:
        log = RaftLogDir.open(root / "log")
        _fill(log, 2)
        filler = fill(root)
        # more than the slack in the segment's last page, less than a write buffer
        big = _entries(2, 25, size=200)
        with pytest.raises(OSError, match="No space left") as info:
            log.append(big)
        assert info.value.errno == errno.ENOSPC
        with pytest.raises(OSError, match="No space left"):  # still full: refused again
            log.append(big)
        filler.unlink()
        log.append(_entries(2, 1, epoch=2))
        again = RaftLogDir.open(root / "log")
        assert "torn tail" not in caplog.text
        assert _offsets(again) == [0, 1, 2]


def test_encoded_entries_are_not_taken_for_others_at_the_same_offsets() -> None:
    """A leader that drops entries its disk refused appends others at the same offsets in the
    same epoch (simulation seed 661): the cached encoding of the dropped ones must not be sent."""
    encoded = EncodedEntries()
    dropped = (Entry(1, 2, b"a"), Entry(2, 2, b"b"))
    taking_their_place = (Entry(1, 2, b"c"), Entry(2, 2, b"d"))
    assert encoded(dropped) == encode_entries(dropped)
    assert encoded(dropped) == encode_entries(dropped)
    assert encoded(taking_their_place) == encode_entries(taking_their_place)
    assert [e.data for e in decode_entries(encoded(taking_their_place))] == [b"c", b"d"]
