"""strom.storage.durable: the order of an atomic replace, and its one error policy."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from strom.storage import LogConfig
from strom.storage.durable import atomic_replace, fsync_dir, fsync_file
from tests.log.helpers import T0, batch, open_log

Calls = list[tuple[str, str]]


def eio(*_args: object) -> None:
    raise OSError(errno.EIO, "Input/output error")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Record fsyncs (of a file or a directory) and renames, in order."""
    seen: Calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        seen.append(("fsync", kind))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.append(("replace", Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


def test_atomic_replace_fsyncs_the_file_renames_then_fsyncs_the_directory(
    tmp_path: Path, calls: Calls
) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old contents, longer than the new")
    atomic_replace(target, b"new")
    assert calls == [("fsync", "file"), ("replace", "state"), ("fsync", "dir")]
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_unsynced_replace_is_atomic_without_fsyncs(tmp_path: Path, calls: Calls) -> None:
    target = tmp_path / "state"
    atomic_replace(target, memoryview(b"abc"), sync=False)
    assert calls == [("replace", "state")]
    assert target.read_bytes() == b"abc"


def test_a_leftover_temp_file_is_truncated_and_reused(tmp_path: Path) -> None:
    """A crash before the rename leaves `<name>.tmp`; the next write must not keep its tail."""
    (tmp_path / "state.tmp").write_bytes(b"a torn write from before the crash" * 100)
    atomic_replace(tmp_path / "state", b"whole")
    assert (tmp_path / "state").read_bytes() == b"whole"
    assert not (tmp_path / "state.tmp").exists()


def test_a_format_may_name_its_temp_file(tmp_path: Path, calls: Calls) -> None:
    atomic_replace(tmp_path / "1-2.checkpoint", b"snapshot", temp_suffix=".part")
    assert calls[1] == ("replace", "1-2.checkpoint")
    assert [p.name for p in tmp_path.iterdir()] == ["1-2.checkpoint"]


def test_a_failed_file_fsync_keeps_the_old_file_and_removes_the_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(OSError, match="Input/output error") as info:
        atomic_replace(target, b"new")
    assert info.value.errno == errno.EIO
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state"]


def test_a_failed_directory_fsync_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename happened but may not survive a crash: the caller must hear of it."""
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            eio()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output error"):
        atomic_replace(tmp_path / "state", b"new")
    assert (tmp_path / "state").read_bytes() == b"new"


def test_a_directory_that_cannot_be_opened_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No silent no-op (the partition log's old helper skipped it): durability is unknown."""
    real_open = os.open

    def refuse_dirs(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        if Path(path).is_dir():
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refuse_dirs)
    with pytest.raises(PermissionError):
        fsync_dir(tmp_path)
    with pytest.raises(PermissionError):
        fsync_dir(tmp_path, missing_ok=True)


@pytest.mark.parametrize("fsync", [fsync_dir, fsync_file])
def test_missing_ok_waives_only_a_missing_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: Callable[..., None]
) -> None:
    gone = tmp_path / "renamed-away"
    with pytest.raises(FileNotFoundError):
        fsync(gone)
    fsync(gone, missing_ok=True)
    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(OSError, match="Input/output error") as info:
        fsync(tmp_path, missing_ok=True)
    assert info.value.errno == errno.EIO


def test_flush_survives_its_directory_being_renamed_for_deletion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Topic deletion closes the log and renames its directory on the event loop; a flush in a
    worker thread that already took its fds goes on to fsync paths that are gone."""
    data_dir = tmp_path / "data"
    log = open_log(data_dir / "t-0", LogConfig(segment_bytes=100))
    for _ in range(3):
        log.append(batch(), 0, T0)  # rolls: a producer snapshot and the epoch file to fsync
    assert len(log.segments) > 1
    real_fsync = os.fsync

    def fsync_after_rename(fd: int) -> None:
        if (data_dir / "t-0").exists():  # the deletion lands after the fds were taken
            os.rename(data_dir / "t-0", data_dir / "t-0.0123-delete")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_after_rename)
    log.flush()
    assert log.failed is None
    assert log.recovery_point == log.log_end_offset
