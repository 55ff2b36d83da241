"""DeleteRecords, retention and truncation from the tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.storage import LogConfig, OffsetOutOfRange
from tests.log.helpers import T0, Clock, batch, get_log, manager, open_log, read_everything

SMALL = LogConfig(segment_bytes=400)


def fill(log_path: Path, n: int = 40, config: LogConfig = SMALL):  # type: ignore[no-untyped-def]
    log = open_log(log_path, config)
    for i in range(n):
        log.append(batch([b"v%d" % i], pid=1, epoch=0, seq=i), i // 10, T0 + i)
    return log


def test_delete_records_advances_start_and_deletes_covered_segments(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0")
    segments = len(log.segments)
    assert log.delete_records_before(17) == 17
    assert log.log_start_offset == 17
    assert all(s.next_offset > 17 for s in log.segments)
    assert len(log.segments) < segments
    assert log.segments[0].base_offset <= 17
    with pytest.raises(OffsetOutOfRange):
        log.read(16, 100)
    assert read_everything(log)[0] == (17, b"v17")
    assert log.delete_records_before(5) == 17  # never moves backwards
    assert log.epochs.entries[0] == (1, 17)
    assert log.append(batch([b"x"], pid=1, epoch=0, seq=40), 3, T0).base_offset == 40


def test_delete_records_to_high_watermark_rolls_active_segment(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0", 5, LogConfig())
    assert log.delete_records_before(-1) == 5
    assert [s.base_offset for s in log.segments] == [5]
    assert log.size_bytes() == 0
    assert log.read(5, 100).size == 0
    # The producer is still known: its next sequence is checked, not accepted blindly.
    (info,) = log.producers()
    assert info.last_sequence == 4
    assert log.append(batch(pid=1, epoch=0, seq=5), 0, T0).base_offset == 5


def test_delete_records_past_high_watermark_is_out_of_range(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0", 3, LogConfig())
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(4)


def test_log_start_offset_survives_restart(tmp_path: Path) -> None:
    m = manager([tmp_path], config=SMALL)
    log = m.create("t", 0, SMALL)
    for i in range(30):
        log.append(batch([b"v%d" % i]), 0, T0)
    log.delete_records_before(13)
    m.close()
    log = get_log(manager([tmp_path], config=SMALL))
    assert log.log_start_offset == 13
    assert read_everything(log)[0] == (13, b"v13")


def test_truncate_to_mid_log_and_continue(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0")
    log.truncate_to(23)
    assert log.log_end_offset == 23 == log.high_watermark
    assert read_everything(log)[-1] == (22, b"v22")
    assert log.producers()[0].last_sequence == 22
    assert log.append(batch([b"new"], pid=1, epoch=0, seq=23), 2, T0).base_offset == 23
    assert not [p for p in (tmp_path / "t-0").glob("*.snapshot") if int(p.stem) > 24]


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a", b"b", b"c"]), 0, T0)
    log.append(batch([b"d", b"e"]), 0, T0)
    log.truncate_to(4)
    assert log.log_end_offset == 3


def test_truncate_below_log_start_restarts_empty(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0", 10, LogConfig())
    log.delete_records_before(6)
    log.truncate_to(2)
    assert log.log_start_offset == log.log_end_offset == 2
    assert log.producers() == []
    assert log.latest_epoch() is None
    assert log.append(batch(), 0, T0).base_offset == 2


def test_retention_by_time_and_size(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=400, retention_ms=1000)
    log = open_log(tmp_path / "t-0", config, clock)
    for i in range(40):
        log.append(batch([b"v%d" % i], ts=T0 + i * 100), 0, T0)
    assert log.enforce_retention(T0 + 1000) == 0
    deleted = log.enforce_retention(T0 + 2500)
    assert deleted > 0
    assert log.segments[0].max_timestamp >= T0 + 1500
    assert log.log_start_offset == log.segments[0].base_offset
    log.update_config(LogConfig(segment_bytes=400, retention_ms=-1, retention_bytes=800))
    before = log.size_bytes()
    log.enforce_retention(T0)
    # Kafka's rule: delete oldest segments while the rest still holds >= retention.bytes.
    assert 800 <= log.size_bytes() < 800 + log.segments[0].size_bytes < before
    assert log.read(log.log_start_offset, 100).size > 0
    log.update_config(LogConfig(cleanup_policy=("compact",), retention_bytes=0))
    assert log.enforce_retention(T0 + 10**9) == 0
