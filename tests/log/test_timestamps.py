"""Time index and ListOffsets lookups (by timestamp, and MAX_TIMESTAMP)."""

from __future__ import annotations

import random
from pathlib import Path

from strom.storage import LogConfig
from strom.wire.records import Codec, Record, build_batch
from tests.log.helpers import T0, batch, open_log


def test_offset_for_timestamp_matches_brute_force(tmp_path: Path) -> None:
    rng = random.Random(7)
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=700, index_interval_bytes=150))
    records: list[tuple[int, int]] = []  # (offset, timestamp)
    for i in range(80):
        stamps = [T0 + i * 50 + rng.randint(-120, 120) for _ in range(rng.randint(1, 4))]
        data = build_batch(
            [Record(b"k", b"v", (), ts) for ts in stamps],
            codec=rng.choice([Codec.NONE, Codec.GZIP]),
        )
        base = log.append(data, i // 20, T0 + 10**6).base_offset
        records += [(base + j, ts) for j, ts in enumerate(stamps)]
    assert len(log.segments) > 3
    for target in range(T0 - 200, T0 + 80 * 50 + 200, 37):
        expected = next(((o, ts) for o, ts in records if ts >= target), None)
        found = log.offset_for_timestamp(target)
        if expected is None:
            assert found is None
        else:
            assert found is not None, target
            assert found[:2] == expected, target
            assert found[2] == log.epoch_at(found[0])
    top = max(ts for _, ts in records)
    first_top = next(o for o, ts in records if ts == top)
    assert log.max_timestamp_offset() == (first_top, top, log.epoch_at(first_top))


def test_lookups_respect_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a", b"b", b"c", b"d"], ts=T0), 0, T0)  # timestamps T0..T0+3
    log.delete_records_before(2)
    assert log.offset_for_timestamp(T0) == (2, T0 + 2, 0)
    assert log.offset_for_timestamp(T0 + 3) == (3, T0 + 3, 0)
    assert log.offset_for_timestamp(T0 + 4) is None


def test_log_append_time_lookups_use_batch_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    log.append(batch([b"a", b"b"], ts=1), 0, T0)
    log.append(batch([b"c", b"d"], ts=1), 0, T0 + 10)
    assert log.offset_for_timestamp(T0 + 1) == (2, T0 + 10, 0)
    assert log.offset_for_timestamp(0) == (0, T0, 0)
    assert log.max_timestamp_offset() == (2, T0 + 10, 0)


def test_empty_log_and_no_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None
    log.append(build_batch([Record(b"k", b"v", (), -1)]), 0, T0)
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None


def test_time_index_entries_are_monotonic(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    for ts in [5, 3, 9, 9, 2, 11]:
        log.append(batch(ts=T0 + ts), 0, T0)
    index = log._segments[0].time_index
    entries = [index.entry(i) for i in range(index.entries)]
    # No entry for the first batch; then (max so far, first batch reaching it) per batch.
    assert [(ts - T0, rel) for ts, rel in entries] == [(5, 0), (9, 2), (11, 5)]
