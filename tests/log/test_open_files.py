"""One fd per partition: only the active `.log` stays open; indexes wait in memory.

Older segments open their `.log` per use and let it go; index entries of the
active segment are written at roll, flush and clean shutdown, so a crash can
leave an index that lags its log, which loading must rebuild or extend.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from strom.storage import LogConfig, PartitionLog
from tests.log.helpers import T0, batch, crash, get_log, manager, open_log, read_everything

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def open_fds(under: Path) -> int:
    """This process's fds on files below `under` (other tests' leftovers do not count)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the fd listdir itself used
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(f"{under}/")
    return count


def fill(log: PartitionLog, segments: int) -> None:
    i = 0
    while len(log.segments) < segments or log.segments[-1].size_bytes < 300:
        log.append(batch([b"record-%04d" % i, b"x" * (i % 50)], ts=T0 + i), 0, T0)
        i += 1


def index_entries(log: PartitionLog) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    return [
        (
            [s.offset_index.entry(n) for n in range(s.offset_index.entries)],
            [s.time_index.entry(n) for n in range(s.time_index.entries)],
        )
        for s in log._segments
    ]


def test_a_partition_holds_one_fd_whatever_it_does(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 5)
    assert open_fds(tmp_path) == 1
    log.flush()
    assert len(read_everything(log)) > 20  # reads every segment
    assert log.offset_for_timestamp(T0 + 3) is not None
    assert log.max_timestamp_offset() is not None
    assert open_fds(tmp_path) == 1
    held = log.read(0, 100)  # a result of an old segment keeps its fd, for sendfile
    assert open_fds(tmp_path) == 2
    assert log.read(1, 100).file is held.file  # one fd per segment however many readers
    del held
    assert open_fds(tmp_path) == 1
    log.delete_records_before(log.segments[2].base_offset)
    log.truncate_to(log.segments[-2].base_offset + 1)  # the previous segment is active again
    assert open_fds(tmp_path) == 1
    log.append(batch([b"after truncation"]), 0, T0)
    assert read_everything(log)[-1][1] == b"after truncation"
    log.close()
    assert open_fds(tmp_path) == 0


def test_read_result_of_a_deleted_old_segment_still_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 3)
    result = log.read(0, 1 << 20)
    expected = result.read_bytes()
    log.delete_records_before(log.segments[1].base_offset)
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    assert result.read_bytes() == expected
    assert os.pread(result.fd, 10, 0) == expected[:10]


def test_clean_shutdown_closes_a_held_old_segment_fd(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 3)
    result = log.read(0, 1 << 20)
    log.close()
    assert result.file is not None
    assert result.file.closed
    with pytest.raises(OSError, match="closed at shutdown"):
        result.read_bytes()


def test_index_entries_wait_in_memory_until_roll_flush_or_close(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 2)
    old, active = log._segments
    assert old.offset_index.pending == 0  # written when it rolled
    assert old.offset_index.path.stat().st_size == 8 * old.offset_index.entries
    assert active.offset_index.pending > 0
    assert not active.offset_index.path.exists()  # created by the first write-out
    log.flush()
    assert active.offset_index.pending == 0
    assert active.offset_index.path.stat().st_size == 8 * active.offset_index.entries
    log.append(batch([b"y" * 200]), 0, T0)
    log.close()
    assert active.offset_index.path.stat().st_size == 8 * active.offset_index.entries


def test_index_lagging_its_log_after_a_crash_is_rebuilt(tmp_path: Path) -> None:
    m = manager([tmp_path], config=CONFIG)
    log = m.create("t", 0, CONFIG)
    fill(log, 3)
    log.flush()
    for i in range(3):  # index entries for these exist only in memory
        log.append(batch([b"z" * 60], ts=T0 + 1000 + i), 0, T0)
    active = log._segments[-1]
    assert active.offset_index.pending > 0
    expected, entries = read_everything(log), index_entries(log)
    on_disk = active.offset_index.path.stat().st_size
    crash(m)
    assert active.offset_index.path.stat().st_size == on_disk < 8 * active.offset_index.entries
    log = get_log(manager([tmp_path], config=CONFIG))
    assert read_everything(log) == expected
    assert index_entries(log) == entries
    assert log.offset_for_timestamp(T0 + 1002) == (expected[-1][0], T0 + 1002, 0)
    assert active.offset_index.path.stat().st_size == 8 * len(entries[-1][0])


def test_short_index_of_an_old_segment_is_extended_on_a_clean_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = manager([tmp_path], config=CONFIG)
    fill(m.create("t", 0, CONFIG), 3)
    m.close()
    log = get_log(manager([tmp_path], config=CONFIG))
    expected, entries = read_everything(log), index_entries(log)
    log.close()
    first = tmp_path / "t-0" / "00000000000000000000"
    sizes = [first.with_suffix(s).stat().st_size for s in (".index", ".timeindex")]
    for suffix, size in ((".index", 8), (".timeindex", 12)):
        path = first.with_suffix(suffix)
        path.write_bytes(path.read_bytes()[:size])  # keep one entry
    log = get_log(manager([tmp_path], config=CONFIG))
    assert "recovering" not in caplog.text  # a short index is no reason for a full scan
    assert read_everything(log) == expected
    assert index_entries(log)[0][0] == entries[0][0]
    assert first.with_suffix(".index").stat().st_size == sizes[0]
