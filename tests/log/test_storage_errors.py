"""Disk failures: the log stays consistent, raises KAFKA_STORAGE_ERROR and goes read-only."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from strom.storage import KafkaStorageError, LogConfig, PartitionLog
from strom.wire.errors import ErrorCode
from tests.log.helpers import T0, batch, get_log, manager, open_log, read_everything

RealWrite = Callable[[int, bytes], int]


def full_disk_after(half_of_fd: Callable[[int], bool]) -> Callable[[int, object], int]:
    """An os.write that writes half of a matching call, then fails with ENOSPC."""
    real = os.write
    state = {"partial": False}

    def write(fd: int, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]
        if not half_of_fd(fd):
            return real(fd, view)
        if not state["partial"] and len(view) > 1:
            state["partial"] = True
            return real(fd, view[: len(view) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    return write


def check_offline_but_readable(log: PartitionLog, expected: list[tuple[int, bytes | None]]) -> None:
    assert log.failed is not None
    assert read_everything(log) == expected
    with pytest.raises(KafkaStorageError):
        log.append(batch(), 0, T0)


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    for i in range(3):
        log.append(batch([b"ok%d" % i]), 0, T0)
    return log


def test_enospc_mid_segment_write(log: PartitionLog, monkeypatch: pytest.MonkeyPatch) -> None:
    before = read_everything(log)
    seg = log._segments[-1]
    size = seg.path.stat().st_size
    monkeypatch.setattr(os, "write", full_disk_after(lambda fd: names(fd, ".log")))
    with pytest.raises(KafkaStorageError) as info:
        log.append(batch([b"x" * 1000]), 0, T0)
    assert info.value.error == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    assert seg.path.stat().st_size == size
    assert log.log_end_offset == 3
    check_offline_but_readable(log, before)


def test_enospc_on_index_write_at_flush_takes_partition_offline(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = read_everything(log)
    seg = log._segments[-1]
    size = seg.path.stat().st_size
    assert seg.offset_index.pending  # appends keep index entries in memory until a flush
    monkeypatch.setattr(os, "write", full_disk_after(lambda fd: names(fd, ".index")))
    with pytest.raises(KafkaStorageError):
        log.flush()
    monkeypatch.undo()
    assert log.recovery_point == 0
    assert seg.offset_index.path.stat().st_size == 0  # the half-written entries were cut back
    assert seg.path.stat().st_size == size
    check_offline_but_readable(log, before)


def names(fd: int, suffix: str) -> bool:
    return os.readlink(f"/proc/self/fd/{fd}").endswith(suffix)


def test_enospc_on_epoch_checkpoint(log: PartitionLog, monkeypatch: pytest.MonkeyPatch) -> None:
    before = read_everything(log)
    monkeypatch.setattr(os, "write", full_disk_after(lambda fd: True))
    with pytest.raises(KafkaStorageError):
        log.append(batch(), 5, T0)  # a new epoch must be checkpointed first
    monkeypatch.undo()
    assert log.latest_epoch() == 0
    check_offline_but_readable(log, before)


def test_failed_fsync_takes_partition_offline(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(KafkaStorageError):
        log.flush()
    monkeypatch.undo()
    assert log.recovery_point == 0
    check_offline_but_readable(log, read_everything(log))


def test_log_recovers_cleanly_after_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    log.append(batch([b"kept"]), 0, T0)
    monkeypatch.setattr(os, "write", full_disk_after(lambda fd: names(fd, ".log")))
    with pytest.raises(KafkaStorageError):
        log.append(batch([b"lost" * 100]), 0, T0)
    monkeypatch.undo()
    assert m.flush_due(T0 + 10**12) == []  # offline logs are not offered for flushing
    m.close()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # not clean: recover next time
    log = get_log(manager([tmp_path]))
    assert read_everything(log) == [(0, b"kept")]
    assert log.append(batch([b"again"]), 0, T0).base_offset == 1
