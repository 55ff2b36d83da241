"""Crash recovery: torn tails, corruption, lost or corrupt indexes, markers and checkpoints."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strom.storage import LogConfig, LogManager
from strom.storage.log.datadir import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE
from tests.log.helpers import T0, Clock, batch, crash, get_log, manager, read_everything

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def build(
    root: Path, batches: int = 12, config: LogConfig = CONFIG
) -> list[tuple[int, bytes | None]]:
    """A crashed (never flushed, no marker) log t-0 in `root`; returns its records."""
    m = manager([root], config=config)
    log = m.create("t", 0, config)
    for i in range(batches):
        log.append(batch([b"r%d-%d" % (i, j) for j in range(1 + i % 3)]), 0, T0)
    records = read_everything(log)
    crash(m)
    return records


def reopen(root: Path, config: LogConfig = CONFIG) -> LogManager:
    return manager([root], config=config)


def batch_bounds(path: Path) -> list[tuple[int, int]]:
    """(start, end) byte ranges of the batches in a segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        out.append((pos, pos + size))
        pos += size
    return out


def test_torn_tail_at_every_byte_of_last_batch(tmp_path: Path) -> None:
    template = tmp_path / "template"
    records = build(template, batches=4, config=LogConfig())
    seg = template / "t-0" / "00000000000000000000.log"
    bounds = batch_bounds(seg)
    last_start, last_end = bounds[-1]
    kept_records = records[:-1]  # the last batch (i=3) holds one record
    full = seg.read_bytes()
    for cut in range(last_start, last_end):
        root = tmp_path / f"cut{cut}"
        shutil.copytree(template, root)
        (root / "t-0" / seg.name).write_bytes(full[:cut])
        log = get_log(reopen(root, LogConfig()))
        assert log.log_end_offset == kept_records[-1][0] + 1, cut
        assert read_everything(log) == kept_records, cut
        assert (root / "t-0" / seg.name).stat().st_size == last_start
        assert log.append(batch([b"after"]), 0, T0).base_offset == log.log_end_offset - 1
        shutil.rmtree(root)


def test_corrupt_byte_in_middle_truncates_there_and_drops_later_segments(tmp_path: Path) -> None:
    records = build(tmp_path, batches=30)
    first = tmp_path / "t-0" / "00000000000000000000.log"
    segments_before = len(list((tmp_path / "t-0").glob("*.log")))
    assert segments_before > 2
    start, end = batch_bounds(first)[2]
    data = bytearray(first.read_bytes())
    data[(start + end) // 2] ^= 0x01
    first.write_bytes(bytes(data))
    log = get_log(reopen(tmp_path))
    survivors = read_everything(log)
    assert survivors == records[: len(survivors)]
    assert log.log_end_offset == len(survivors) == 1 + 2  # batches 0 and 1: 1 + 2 records
    assert len(list((tmp_path / "t-0").glob("*.log"))) == 1
    assert log.append(batch(), 0, T0).base_offset == 3


def test_corrupt_length_field_is_treated_like_a_torn_tail(tmp_path: Path) -> None:
    records = build(tmp_path, batches=3, config=LogConfig())
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    start, _ = batch_bounds(seg)[1]
    data = bytearray(seg.read_bytes())
    data[start + 8 : start + 12] = (10**6).to_bytes(4, "big")
    seg.write_bytes(bytes(data))
    log = get_log(reopen(tmp_path, LogConfig()))
    assert read_everything(log) == records[:1]


def test_deleted_indexes_are_rebuilt(tmp_path: Path) -> None:
    records = build(tmp_path, batches=40)
    m = reopen(tmp_path)
    m.close()
    sizes = {p.name: p.stat().st_size for p in (tmp_path / "t-0").glob("*index")}
    for p in (tmp_path / "t-0").glob("*index"):
        p.unlink()
    log = get_log(reopen(tmp_path))
    assert read_everything(log) == records
    for offset in range(0, log.log_end_offset, 7):
        assert log.read(offset, 1).size > 0
    rebuilt = {p.name: p.stat().st_size for p in (tmp_path / "t-0").glob("*index")}
    assert rebuilt == sizes


@pytest.mark.parametrize(
    "damage", ["partial-entry", "garbage-entry", "truncated-timeindex", "future-timeindex"]
)
def test_corrupt_indexes_are_rebuilt_even_after_clean_shutdown(tmp_path: Path, damage: str) -> None:
    records = build(tmp_path, batches=40)
    reopen(tmp_path).close()
    index = tmp_path / "t-0" / "00000000000000000000.index"
    timeindex = index.with_suffix(".timeindex")
    assert index.stat().st_size >= 16
    if damage == "partial-entry":
        index.write_bytes(index.read_bytes() + b"\x01\x02\x03")
    elif damage == "garbage-entry":
        index.write_bytes(index.read_bytes() + (5).to_bytes(4, "big") + (10**8).to_bytes(4, "big"))
    elif damage == "truncated-timeindex":
        timeindex.write_bytes(timeindex.read_bytes()[:-5])
    else:
        timeindex.write_bytes(timeindex.read_bytes() + (T0 * 2).to_bytes(8, "big") + b"\0\0\1\0")
    log = get_log(reopen(tmp_path))
    assert read_everything(log) == records
    assert index.stat().st_size % 8 == 0
    assert timeindex.stat().st_size % 12 == 0
    top = log.max_timestamp_offset()
    assert top is not None
    assert top[1] == T0 + 2  # the largest real timestamp, not the planted one


def test_clean_shutdown_skips_the_scan_and_marker_is_removed(tmp_path: Path) -> None:
    build(tmp_path, batches=3, config=LogConfig())
    m = reopen(tmp_path, LogConfig())
    m.close()
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    _start, end = batch_bounds(seg)[1]
    data = bytearray(seg.read_bytes())
    data[end - 1] ^= 0xFF  # a payload byte: only a CRC check would notice
    seg.write_bytes(bytes(data))
    log = get_log(reopen(tmp_path, LogConfig()))
    assert log.log_end_offset == 6
    assert not marker.exists()


def test_segments_below_recovery_point_are_not_scanned(tmp_path: Path) -> None:
    m = manager([tmp_path], config=CONFIG)
    log = m.create("t", 0, CONFIG)
    for i in range(30):
        log.append(batch([b"x%d" % i]), 0, T0)
    log.flush()
    m.checkpoint()
    flushed = log.recovery_point
    assert flushed == 30
    for i in range(5):
        log.append(batch([b"y%d" % i]), 0, T0)
    crash(m)
    # Damage inside the first (flushed) segment goes unnoticed, as in Kafka...
    first = tmp_path / "t-0" / "00000000000000000000.log"
    _start, end = batch_bounds(first)[0]
    data = bytearray(first.read_bytes())
    data[end - 1] ^= 0xFF
    first.write_bytes(bytes(data))
    # ...while a torn tail past the recovery point is cut.
    last = max((tmp_path / "t-0").glob("*.log"))
    last.write_bytes(last.read_bytes()[:-4])
    log2 = get_log(reopen(tmp_path))
    assert log2.log_end_offset == 34
    assert log2.recovery_point == flushed


def test_power_loss_of_unflushed_segments(tmp_path: Path) -> None:
    """Files past the recovery point may lose any suffix; the log keeps a clean prefix."""
    records = build(tmp_path, batches=30)
    segs = sorted((tmp_path / "t-0").glob("*.log"))
    segs[-1].unlink()
    segs[-2].write_bytes(segs[-2].read_bytes()[:-7])
    log = get_log(reopen(tmp_path))
    survivors = read_everything(log)
    assert survivors == records[: len(survivors)]
    assert 0 < len(survivors) < len(records)


def test_leftovers_are_cleaned_up(tmp_path: Path) -> None:
    build(tmp_path, batches=2)
    part = tmp_path / "t-0"
    (part / "leader-epoch-checkpoint.tmp").write_text("garbage")
    (part / "00000000000000099999.index").write_bytes(b"")
    (tmp_path / "t-1.0123abcd-delete").mkdir()
    (tmp_path / "t-1.0123abcd-delete" / "junk").write_bytes(b"x")
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "meta.properties").write_text("x")
    m = reopen(tmp_path)
    assert [p.name for p in m.partitions()] == ["t-0"]
    assert not (part / "leader-epoch-checkpoint.tmp").exists()
    assert not (part / "00000000000000099999.index").exists()
    assert not (tmp_path / "t-1.0123abcd-delete").exists()
    assert (tmp_path / "__cluster_metadata-0").exists()


def test_corrupt_recovery_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    records = build(tmp_path, batches=5, config=LogConfig())
    m = reopen(tmp_path, LogConfig())
    m.close()
    (tmp_path / RECOVERY_POINT_FILE).write_text("0\n7\nbogus")
    log = get_log(reopen(tmp_path, LogConfig()))
    assert read_everything(log) == records
    assert log.recovery_point == 0


def test_restart_continues_offsets_and_time_index(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, CONFIG)
    log = m.create("t", 0, CONFIG)
    for i in range(20):
        log.append(batch([b"a"], ts=T0 + i * 10), 0, T0 + 10_000)
    m.close()
    log = get_log(reopen(tmp_path))
    assert log.max_timestamp_offset() == (19, T0 + 190, 0)
    assert log.offset_for_timestamp(T0 + 95) == (10, T0 + 100, 0)
    assert log.append(batch([b"b"], ts=T0 + 5000), 0, T0 + 10_000).base_offset == 20
    assert log.max_timestamp_offset() == (20, T0 + 5000, 0)
