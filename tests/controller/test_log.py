"""The metadata log on disk: append, reopen, replay, roll, retention and torn-tail recovery."""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from typing_extensions import Buffer

from strom.coordinator.metadata.image import MetadataImage
from strom.coordinator.metadata.log import LOG_DIR_NAME, MetadataLog, segment_name
from strom.coordinator.metadata.metadata_records import MetadataError, encode_batch
from strom.wire.formats.metadata.topic_record import TopicRecord
from tests.tinyfs import fill, tiny_filesystem


def _topic(i: int) -> TopicRecord:
    return TopicRecord(f"t{i}", uuid.UUID(int=i + 1))


def _fill(log: MetadataLog, count: int, *, per_batch: int = 2, epoch: int = 1) -> None:
    start = log.end_offset
    for i in range(start, start + count, per_batch):
        log.append(
            [_topic(j) for j in range(i, min(i + per_batch, start + count))],
            epoch=epoch,
            timestamp=i,
        )


def _replay(log: MetadataLog, start: int = 0) -> MetadataImage:
    image = MetadataImage.EMPTY
    for batch in log.read(start):
        image = image.apply_all(batch.records)
    return image


def test_append_reopen_replay(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (0, 0, -1)
    batch = log.append([_topic(0), _topic(1)], epoch=3, timestamp=77)
    assert (batch.base_offset, batch.last_offset, batch.epoch) == (0, 1, 3)
    log.append([_topic(2)], epoch=4, timestamp=78)
    log.close()
    assert (tmp_path / LOG_DIR_NAME / segment_name(0)).exists()
    again = MetadataLog.open(tmp_path)
    assert (again.end_offset, again.last_epoch) == (3, 4)
    batches = list(again.read())
    assert [(b.base_offset, b.last_offset, b.epoch, b.timestamp) for b in batches] == [
        (0, 1, 3, 77),
        (2, 2, 4, 78),
    ]
    assert _replay(again).topic_names() == ["t0", "t1", "t2"]
    assert [b.base_offset for b in again.read(2)] == [2]
    again.append([_topic(3)], epoch=4, timestamp=0)
    assert _replay(again).topic_names() == ["t0", "t1", "t2", "t3"]
    again.close()


def test_epoch_may_not_go_backwards(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    log.append([_topic(0)], epoch=5, timestamp=0)
    with pytest.raises(ValueError, match="older"):
        log.append([_topic(1)], epoch=4, timestamp=0)
    log.close()


def test_segments_roll_and_old_ones_are_deleted(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, segment_bytes=300)
    _fill(log, 20)
    paths = log.segment_paths()
    assert len(paths) > 2
    log.close()
    log = MetadataLog.open(tmp_path, segment_bytes=300)
    assert log.segment_paths() == paths
    assert _replay(log).topic_names() == sorted(f"t{i}" for i in range(20))
    gone = log.delete_before(12)
    assert gone
    assert 0 < log.start_offset <= 12
    assert next(b.base_offset for b in log.read(12)) <= 12
    assert log.end_offset == 20
    log.delete_before(10_000)
    assert len(log.segment_paths()) == 1  # the active segment always stays
    log.close()


def test_reset_continues_at_offset(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    _fill(log, 4)
    log.reset(50)
    assert (log.start_offset, log.end_offset) == (50, 50)
    log.append([_topic(9)], epoch=1, timestamp=0)
    log.close()
    log = MetadataLog.open(tmp_path)
    assert [b.base_offset for b in log.read()] == [50]
    log.close()


def _segment(tmp_path: Path) -> Path:
    return tmp_path / LOG_DIR_NAME / segment_name(0)


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 60, 61, -1])
def test_torn_tail_is_truncated(tmp_path: Path, cut: int) -> None:
    log = MetadataLog.open(tmp_path)
    _fill(log, 4)
    log.close()
    path = _segment(tmp_path)
    good = path.read_bytes()
    torn = encode_batch([_topic(4), _topic(5)], base_offset=4, epoch=1, timestamp=0)
    path.write_bytes(good + torn[:cut])
    log = MetadataLog.open(tmp_path)
    assert path.read_bytes() == good
    assert log.end_offset == 4
    log.append([_topic(7)], epoch=1, timestamp=0)  # appends continue cleanly
    assert _replay(log).topic_names() == ["t0", "t1", "t2", "t3", "t7"]
    log.close()


def test_bad_crc_in_last_batch_is_truncated(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    _fill(log, 6)
    log.close()
    path = _segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x55  # inside the last batch's records
    path.write_bytes(bytes(data))
    log = MetadataLog.open(tmp_path)
    assert log.end_offset == 4
    log.close()


def test_garbage_after_valid_batches_is_truncated(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    _fill(log, 2)
    log.close()
    path = _segment(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good + b"\x00" * 100)  # e.g. preallocated, never written
    log = MetadataLog.open(tmp_path)
    assert (log.end_offset, path.read_bytes()) == (2, good)
    log.close()


def test_corruption_in_an_older_segment_refuses_to_open(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, segment_bytes=200)
    _fill(log, 10)
    first = log.segment_paths()[0]
    log.close()
    data = bytearray(first.read_bytes())
    data[-2] ^= 0x55
    first.write_bytes(bytes(data))
    with pytest.raises(MetadataError, match="corrupt"):
        MetadataLog.open(tmp_path, segment_bytes=200)


def test_gap_between_segments_refuses_to_open(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    _fill(log, 2)
    log.close()
    (tmp_path / LOG_DIR_NAME / segment_name(7)).write_bytes(b"")
    with pytest.raises(MetadataError, match="expected 2"):
        MetadataLog.open(tmp_path)


def test_stray_file_refuses_to_open(tmp_path: Path) -> None:
    (tmp_path / LOG_DIR_NAME).mkdir()
    (tmp_path / LOG_DIR_NAME / "junk.log").write_bytes(b"")
    with pytest.raises(MetadataError, match="unexpected file"):
        MetadataLog.open(tmp_path)


def test_failed_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = MetadataLog.open(tmp_path)
    _fill(log, 2)
    size = _segment(tmp_path).stat().st_size

    def boom(fd: int) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr("strom.coordinator.metadata.log.os.fsync", boom)
    with pytest.raises(OSError, match="fire"):
        log.append([_topic(5)], epoch=1, timestamp=0)
    monkeypatch.undo()
    assert (log.end_offset, _segment(tmp_path).stat().st_size) == (2, size)
    log.append([_topic(6)], epoch=1, timestamp=0)
    assert _replay(log).topic_names() == ["t0", "t1", "t6"]
    log.close()


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
    log = MetadataLog.open(tmp_path)
    _fill(log, 2)
    size = _segment(tmp_path).stat().st_size
    monkeypatch.setattr(os, "pwrite", _partial_then_enospc(os.pwrite))
    with pytest.raises(OSError, match="No space left") as info:
        log.append([_topic(5)], epoch=1, timestamp=0)
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert (log.end_offset, _segment(tmp_path).stat().st_size) == (2, size)
    log.append([_topic(6)], epoch=1, timestamp=0)
    log.append([_topic(7)], epoch=1, timestamp=0)
    log.close()
    again = MetadataLog.open(tmp_path)
    assert "torn tail" not in caplog.text
    assert _replay(again).topic_names() == ["t0", "t1", "t6", "t7"]
    assert again.end_offset == 4
    again.close()


def test_a_failed_cut_back_is_repeated_before_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = MetadataLog.open(tmp_path)
    _fill(log, 2)
    size = _segment(tmp_path).stat().st_size

    def no_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pwrite", _partial_then_enospc(os.pwrite))
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError, match="No space left"):
        log.append([_topic(5) for _ in range(20)], epoch=1, timestamp=0)
    monkeypatch.undo()
    assert _segment(tmp_path).stat().st_size > size  # half a batch is still there
    log.append([_topic(6)], epoch=1, timestamp=0)
    log.close()
    again = MetadataLog.open(tmp_path)
    assert _replay(again).topic_names() == ["t0", "t1", "t6"]
    again.close()


def test_a_failed_roll_leaves_no_segment_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = MetadataLog.open(tmp_path, segment_bytes=1)
    _fill(log, 2)

    def no_dir_sync(path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("strom.coordinator.metadata.log.fsync_dir", no_dir_sync)
    with pytest.raises(OSError, match="No space left"):
        log.append([_topic(5)], epoch=1, timestamp=0)
    monkeypatch.undo()
    assert len(log.segment_paths()) == 1
    log.append([_topic(6)], epoch=1, timestamp=0)
    log.close()
    again = MetadataLog.open(tmp_path)
    assert _replay(again).topic_names() == ["t0", "t1", "t6"]
    again.close()


def test_a_full_filesystem_refuses_the_batch_and_then_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with tiny_filesystem(tmp_path / "tiny") as root:
        log = MetadataLog.open(root)
        _fill(log, 2)
        filler = fill(root)
        # more than the slack in the segment's last page, less than a write buffer
        big = [TopicRecord("x" * 200, uuid.UUID(int=1000 + i)) for i in range(25)]
        with pytest.raises(OSError, match="No space left") as info:
            log.append(big, epoch=1, timestamp=0)
        assert info.value.errno == errno.ENOSPC
        with pytest.raises(OSError, match="No space left"):  # still full: refused again, nothing left over
            log.append(big, epoch=1, timestamp=0)
        filler.unlink()
        log.append([_topic(6)], epoch=1, timestamp=0)
        log.close()
        again = MetadataLog.open(root)
        assert "torn tail" not in caplog.text
        assert _replay(again).topic_names() == ["t0", "t1", "t6"]
        again.close()
