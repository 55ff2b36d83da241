"""The log cleaner on one log: what survives, what a rewritten batch keeps, and when it runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from strom.storage import LogConfig
from strom.storage.cleaner.log_cleaner import assess
from strom.wire.records import Codec, TimestampType
from tests.log.compaction import COMPACT, clean, cleaner, keyed, latest, read_all
from tests.log.helpers import T0, Clock, manager

DELETE_HORIZON = 0x40


def fill(log, clock: Clock, n: int, keys: int, *, start: int = 0):  # type: ignore[no-untyped-def]
    """n single-record batches over `keys` keys; (offset, key, value) of each."""
    writes = []
    for i in range(start, start + n):
        key, value = b"k%d" % (i % keys), b"v%d" % i
        result = log.append(keyed([(key, value)], T0 + i), 0, clock())
        writes.append((result.base_offset, key, value))
    return writes


def survivors(writes, active_base: int):  # type: ignore[no-untyped-def]
    """What a full pass keeps: the active segment, plus the last write per key below it."""
    last = latest([w for w in writes if w[0] < active_base])
    return [w for w in writes if w[0] >= active_base or last[w[1]][0] == w[0]]


def test_keeps_the_latest_record_per_key_at_its_offset(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    writes = fill(log, clock, 80, 7)
    segments_before = len(log.segments)
    result = clean(cleaner(m, clock), log)
    assert result is not None
    active_base = log.segments[-1].base_offset
    assert result.map_end == active_base
    assert [(s.offset, s.key, s.value) for s in read_all(log)] == survivors(writes, active_base)
    assert len(log.segments) < segments_before
    assert log.log_end_offset == 80
    assert log.clean_offset == active_base
    assert not list(tmp_path.glob("t-0/*.cleaned"))
    assert not list(tmp_path.glob("t-0/*.swap"))
    # A second pass over a clean log changes nothing.
    sizes = [s.size_bytes for s in log.segments]
    clean(cleaner(m, clock), log)
    assert [s.size_bytes for s in log.segments] == sizes


@pytest.mark.parametrize("codec", list(Codec))
def test_rewritten_batch_keeps_metadata_and_codec(tmp_path: Path, codec: Codec) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    entries = [(b"a", b"1" * 50), (b"b", b"2" * 50), (b"c", b"3" * 50), (b"d", b"4" * 50)]
    log.append(keyed(entries, T0, codec=codec, pid=7, epoch=3, seq=10), 5, clock())
    log.append(keyed([(b"b", b"new"), (b"d", b"new")], T0 + 100), 5, clock())
    for i in range(30):  # roll the two batches out of the active segment
        log.append(keyed([(b"z%d" % i, b"x" * 40)], T0 + 200 + i), 6, clock())
    clean(cleaner(m, clock), log)
    seen = read_all(log)
    first = [s for s in seen if s.offset < 4]
    assert [(s.offset, s.key, s.value) for s in first] == [
        (0, b"a", b"1" * 50),
        (2, b"c", b"3" * 50),
    ]
    assert [s.timestamp for s in first] == [T0, T0 + 2]
    header = first[0].batch
    assert header.codec is codec
    assert (header.base_offset, header.last_offset_delta, header.record_count) == (0, 3, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 10)
    assert header.partition_leader_epoch == 5
    assert header.max_timestamp == T0 + 2  # recomputed from the survivors (CreateTime)
    assert not header.attributes & DELETE_HORIZON
    # The second batch lost nothing, so it is stored byte for byte as before.
    assert [(s.offset, s.value) for s in seen if 4 <= s.offset < 6] == [(4, b"new"), (5, b"new")]


def test_log_append_time_batches_keep_their_append_time(tmp_path: Path) -> None:
    clock = Clock()
    config = dataclasses.replace(COMPACT, message_timestamp_type="LogAppendTime")
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    log.append(keyed([(b"a", b"1"), (b"b", b"2")], T0 - 50), 0, T0 + 7)
    log.append(keyed([(b"a", b"3")], T0), 0, T0 + 8)
    for i in range(30):
        log.append(keyed([(b"z%d" % i, b"x" * 40)], T0), 0, T0 + 9)
    clean(cleaner(m, clock), log)
    first = read_all(log)[0]
    assert (first.offset, first.key, first.timestamp) == (1, b"b", T0 + 7)
    assert first.batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert first.batch.max_timestamp == T0 + 7


def test_tombstones_get_a_delete_horizon_then_go(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    log.append(keyed([(b"gone", b"old"), (b"kept", b"1")], T0), 0, clock())
    log.append(keyed([(b"gone", None)], T0 + 1), 0, clock())
    fill(log, clock, 30, 30, start=100)
    c = cleaner(m, clock)
    result = clean(c, log)
    assert result is not None
    horizon = clock.now + COMPACT.delete_retention_ms
    assert result.horizon == horizon == log.tombstone_horizon_ms
    tombstone = next(s for s in read_all(log) if s.key == b"gone")
    assert (tombstone.offset, tombstone.value, tombstone.timestamp) == (2, None, T0 + 1)
    assert tombstone.batch.attributes & DELETE_HORIZON
    assert tombstone.batch.base_timestamp == horizon
    assert [s.value for s in read_all(log) if s.key == b"gone"] == [None]

    clock.now = horizon - 1  # not yet: kept, and nothing makes the log cleanable
    found = assess(log, clock.now)
    assert found is not None
    assert not found.cleanable
    clean(c, log)
    assert [s.offset for s in read_all(log) if s.key == b"gone"] == [2]

    clock.now = horizon
    found = assess(log, clock.now)
    assert found is not None
    assert found.horizon_due
    assert found.cleanable
    assert c.clean_once()
    assert [s for s in read_all(log) if s.key == b"gone"] == []
    assert [s.value for s in read_all(log) if s.key == b"kept"] == [b"1"]
    assert log.tombstone_horizon_ms is None


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    clock = Clock(T0 + 1000)
    config = dataclasses.replace(COMPACT, min_compaction_lag_ms=5000)
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    writes = fill(log, clock, 60, 5)
    found = assess(log, clock.now)
    assert found is not None
    assert found.first_uncleanable == 0
    assert not found.cleanable
    clock.now = T0 + 5000 + 30  # the first ~30 records are now old enough
    found = assess(log, clock.now)
    assert found is not None
    assert 0 < found.first_uncleanable < log.segments[-1].base_offset
    clean(cleaner(m, clock), log)
    young = [w for w in writes if w[0] >= found.first_uncleanable]
    seen = [(s.offset, s.key, s.value) for s in read_all(log)]
    assert seen[-len(young) :] == young  # untouched
    assert log.clean_offset == found.first_uncleanable


def test_max_compaction_lag_forces_cleaning_and_rolls_the_active_segment(tmp_path: Path) -> None:
    clock = Clock(T0)
    config = dataclasses.replace(
        COMPACT, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000, segment_bytes=10**6
    )
    assert config.roll_ms == 60_000  # segment.ms capped by the lag on compacted topics
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    for i in range(10):
        log.append(keyed([(b"k", b"v%d" % i)], T0 + i), 0, clock())
    clock.now = T0 + 61_000
    log.append(keyed([(b"k", b"late")], clock.now), 0, clock.now)
    assert len(log.segments) == 2  # rolled: the active segment outlived the lag
    found = assess(log, clock.now)
    assert found is not None
    assert found.overdue_ms == 1000
    assert found.cleanable
    log.update_config(dataclasses.replace(config, max_compaction_lag_ms=2**63 - 1))
    found = assess(log, clock.now)
    assert found is not None
    assert found.overdue_ms == 0
    assert not found.cleanable
    log.update_config(config)
    assert cleaner(m, clock).clean_once()
    assert [(s.offset, s.value) for s in read_all(log)] == [(9, b"v9"), (10, b"late")]


def test_dirty_ratio_threshold(tmp_path: Path) -> None:
    clock = Clock()
    config = dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.5)
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    fill(log, clock, 120, 120)  # every key distinct: cleaning removes nothing
    c = cleaner(m, clock)
    assert c.clean_once()
    found = assess(log, clock.now)
    assert found is not None
    assert found.dirty_bytes == 0
    assert not found.cleanable
    fill(log, clock, 20, 120, start=120)
    found = assess(log, clock.now)
    assert found is not None
    assert 0 < found.ratio <= 0.5
    assert not found.cleanable
    assert not c.clean_once()
    fill(log, clock, 200, 120, start=140)
    found = assess(log, clock.now)
    assert found is not None
    assert found.ratio > 0.5
    assert found.cleanable
    assert c.clean_once()


def test_keyless_records_are_dropped_and_producers_keep_an_empty_last_batch(tmp_path: Path) -> None:
    clock = Clock()
    plain = dataclasses.replace(COMPACT, cleanup_policy=("delete",))
    m = manager([tmp_path], clock, plain)
    log = m.create("t", 0, plain)
    log.append(keyed([(b"a", b"x")], T0, pid=9, epoch=0, seq=0), 0, clock())
    log.append(keyed([(b"a", b"y")], T0, pid=9, epoch=0, seq=1), 0, clock())
    from tests.log.helpers import batch

    log.append(batch([b"no key"], keys=[None]), 0, clock())
    log.append(keyed([(b"a", b"z")], T0), 0, clock())  # supersedes pid 9's records
    fill(log, clock, 30, 30, start=100)
    log.update_config(COMPACT)  # cleanup.policy changed to compact later on
    clean(cleaner(m, clock), log)
    seen = read_all(log)
    assert [(s.offset, s.value) for s in seen if s.offset < 4] == [(3, b"z")]
    data = log.read(0, 1 << 20).read_bytes()
    from strom.wire.records import iter_batches

    headers = [h for h, _ in iter_batches(data)]
    assert [
        (h.base_offset, h.record_count, h.producer_id, h.base_sequence) for h in headers[:2]
    ] == [
        (1, 0, 9, 1),  # pid 9's newest batch survives empty; its older one is gone
        (3, 1, -1, -1),
    ]
    assert log.producers()[0].last_sequence == 1


def test_log_start_offset_and_empty_head_groups(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    for i in range(40):
        log.append(keyed([(b"same", b"v%d" % i)], T0 + i), 0, clock())
    clean(cleaner(m, clock), log)
    assert log.log_start_offset == 0
    assert log.segments[0].base_offset > 0  # the head group lost everything
    seen = read_all(log)
    active_base = log.segments[-1].base_offset
    assert [s.offset for s in seen if s.offset < active_base] == [active_base - 1]
    assert log.segments[0].base_offset == log.segments[-2].base_offset  # one cleaned segment
    assert seen[-1].value == b"v39"
    assert read_all(log, start=0) == seen  # reading from the old start skips the gap
    m.close()
    reloaded = manager([tmp_path], clock, COMPACT).get("t", 0)
    assert reloaded is not None
    assert read_all(reloaded) == seen


def test_a_small_dedupe_buffer_takes_several_passes(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    writes = fill(log, clock, 300, 40)
    c = cleaner(m, clock, dedupe_buffer_size=160 * 30, load_factor=1.0)
    passes = 0
    while c.clean_once():
        passes += 1
        assert passes < 50
    assert passes > 1
    active_base = log.segments[-1].base_offset
    assert [(s.offset, s.key, s.value) for s in read_all(log)] == survivors(writes, active_base)


def test_cleaner_checkpoint_survives_restart(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    fill(log, clock, 60, 6)
    clean(cleaner(m, clock), log)
    cleaned_to = log.clean_offset
    text = (tmp_path / "cleaner-offset-checkpoint").read_text()
    assert text == f"0\n1\nt 0 {cleaned_to}\n"
    m.close()
    again = manager([tmp_path], clock, COMPACT).get("t", 0)
    assert again is not None
    assert again.clean_offset == cleaned_to
    found = assess(again, clock.now)
    assert found is not None
    assert found.first_dirty == cleaned_to
    # A checkpoint past the log end (a re-created topic) means "all dirty"; garbage is ignored.
    again.clean_offset = 10**6
    found = assess(again, clock.now)
    assert found is not None
    assert found.first_dirty == again.log_start_offset
    (tmp_path / "cleaner-offset-checkpoint").write_text("garbage")
    fresh = manager([tmp_path], clock, COMPACT).get("t", 0)
    assert fresh is not None
    assert fresh.clean_offset is None


def test_non_compacted_logs_are_left_alone(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, LogConfig(segment_bytes=1200))
    log = m.create("t", 0, LogConfig(segment_bytes=1200))
    fill(log, clock, 60, 3)
    assert assess(log, clock.now) is None
    assert not cleaner(m, clock).clean_once()
