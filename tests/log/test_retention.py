"""retention.ms / retention.bytes remove exactly the segments wholly past the limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.storage import LogConfig, OffsetOutOfRange, PartitionLog
from tests.log.helpers import T0, Clock, batch, manager, open_log, read_everything

SEGMENT = 800


def ten_segments(path: Path, config: LogConfig) -> PartitionLog:
    """Segments of ~10 batches; batch i has timestamp T0 + i * 10."""
    log = open_log(path, config)
    i = 0
    while len(log.segments) < 11:
        log.append(batch([b"v%d" % i], ts=T0 + i * 10), 0, T0)
        i += 1
    return log


def expected_time_cut(log: PartitionLog, now: int, retention_ms: int) -> int:
    """How many leading segments have a largest timestamp older than the limit (Kafka's rule:
    stop at the first that is not)."""
    count = 0
    for s in log.segments[:-1]:
        if now - s.max_timestamp <= retention_ms:
            break
        count += 1
    return count


@pytest.mark.parametrize("now_after", [0, 1, 155, 400, 899])
def test_time_retention_deletes_exactly_the_expired_segments(
    tmp_path: Path, now_after: int
) -> None:
    config = LogConfig(segment_bytes=SEGMENT, retention_ms=1000)
    log = ten_segments(tmp_path / f"t-{now_after}", config)
    before = log.segments
    now = before[0].max_timestamp + 1000 + now_after
    count = expected_time_cut(log, now, 1000)
    assert log.enforce_retention(now) == count
    assert log.segments == before[count:]
    assert log.log_start_offset == before[count].base_offset
    if count:
        with pytest.raises(OffsetOutOfRange):
            log.read(before[count].base_offset - 1, 100)
    assert read_everything(log)[0][0] == log.log_start_offset


def test_a_segment_exactly_at_the_limit_stays(tmp_path: Path) -> None:
    log = ten_segments(tmp_path / "t-0", LogConfig(segment_bytes=SEGMENT, retention_ms=1000))
    first = log.segments[0]
    assert log.enforce_retention(first.max_timestamp + 1000) == 0
    assert log.enforce_retention(first.max_timestamp + 1001) == 1


def test_an_old_segment_behind_a_young_one_waits(tmp_path: Path) -> None:
    """Kafka deletes from the head only: a later, older segment is not skipped to."""
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=SEGMENT, retention_ms=1000))
    for ts in [T0 + 5000] * 11 + [T0] * 11 + [T0 + 6000] * 11:
        log.append(batch([b"x"], ts=ts), 0, T0)
    assert log.segments[1].max_timestamp < log.segments[0].max_timestamp
    assert log.enforce_retention(T0 + 5500) == 0


@pytest.mark.parametrize("limit", [0, 1, 799, 800, 2500, 10_000])
def test_size_retention_keeps_at_least_retention_bytes(tmp_path: Path, limit: int) -> None:
    config = LogConfig(segment_bytes=SEGMENT, retention_ms=-1, retention_bytes=limit)
    log = ten_segments(tmp_path / f"t-{limit}", config)
    before = log.segments
    total = sum(s.size_bytes for s in before)
    count, excess = 0, total - limit
    for s in before:  # Kafka: delete while what remains is still >= retention.bytes
        if s.size_bytes == 0 or s.size_bytes > excess:
            break
        excess -= s.size_bytes
        count += 1
    assert log.enforce_retention(T0) == count
    assert log.size_bytes() >= min(limit, total)
    if count < len(before):
        assert log.segments[0].base_offset == before[count].base_offset
    assert log.log_start_offset <= log.log_end_offset


def test_the_active_segment_is_rolled_before_it_goes(tmp_path: Path) -> None:
    """When everything has expired Kafka rolls first, so what it deletes is never active."""
    log = ten_segments(tmp_path / "t-0", LogConfig(segment_bytes=SEGMENT, retention_ms=1000))
    end = log.log_end_offset
    deleted = log.enforce_retention(T0 + 10**6)
    assert deleted == 11
    assert [(s.base_offset, s.size_bytes) for s in log.segments] == [(end, 0)]
    assert log.log_start_offset == end
    assert log.append(batch([b"next"]), 0, T0).base_offset == end


def test_compact_only_topics_ignore_retention_and_compact_delete_ones_do_not(
    tmp_path: Path,
) -> None:
    config = LogConfig(
        segment_bytes=SEGMENT, retention_ms=1000, retention_bytes=0, cleanup_policy=("compact",)
    )
    log = ten_segments(tmp_path / "t-0", config)
    assert log.enforce_retention(T0 + 10**6) == 0
    log.update_config(
        LogConfig(segment_bytes=SEGMENT, retention_ms=1000, cleanup_policy=("compact", "delete"))
    )
    assert log.enforce_retention(T0 + 10**6) > 0


def test_retention_through_the_manager_and_restart(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=SEGMENT, retention_ms=1000)
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    for i in range(60):
        log.append(batch([b"v%d" % i], ts=T0 + i * 10), 0, T0)
    assert m.enforce_retention(T0 + 1300) > 0
    start = log.log_start_offset
    m.close()
    again = manager([tmp_path], clock, config).get("t", 0)
    assert again is not None
    assert again.log_start_offset == start
    assert read_everything(again)[0][0] == start
