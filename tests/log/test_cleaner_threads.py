"""The cleaner against concurrent appends, reads, retention and truncation; its thread; memory."""

from __future__ import annotations

import dataclasses
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from strom.storage import PartitionLog
from strom.storage.cleaner.offset_map import OffsetMap
from strom.storage.log.segment import LogSegment
from tests.log.compaction import COMPACT, clean, cleaner, keyed, read_all
from tests.log.helpers import T0, Clock, manager


def write(log: PartitionLog, clock: Clock, n: int, keys: int, start: int = 0) -> dict[int, bytes]:
    """offset -> value of n single-record writes over `keys` keys."""
    out = {}
    for i in range(start, start + n):
        result = log.append(keyed([(b"k%d" % (i % keys), b"v%d" % i)], T0 + i), 0, clock())
        out[result.base_offset] = b"v%d" % i
    return out


def no_leftovers(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def interfere(monkeypatch: pytest.MonkeyPatch, log: PartitionLog, action: object) -> None:
    """Run `action()` just before the cleaner's first attempt to replace segments."""
    real = log.replace_segments
    calls: list[int] = []

    def replace(old: list[LogSegment], base: int | None, generation: int) -> bool:
        if not calls:
            calls.append(1)
            action()  # type: ignore[operator]
        return real(old, base, generation)

    monkeypatch.setattr(log, "replace_segments", replace)


def test_retention_racing_the_swap_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    config = dataclasses.replace(COMPACT, cleanup_policy=("compact", "delete"))
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    write(log, clock, 80, 5)
    cut = log.segments[1].base_offset
    interfere(monkeypatch, log, lambda: log.delete_records_before(cut))
    before = {s.offset: s.value for s in read_all(log)}
    result = clean(cleaner(m, clock), log)
    assert result is not None
    assert result.stats.groups_replaced == 4
    assert no_leftovers(log.directory)
    seen = read_all(log)
    assert all(before[s.offset] == s.value for s in seen)
    assert seen[0].offset >= log.log_start_offset == cut


def test_truncation_during_a_pass_abandons_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    write(log, clock, 80, 5)
    interfere(monkeypatch, log, lambda: log.truncate_to(log.log_end_offset - 1))
    sizes = [s.size_bytes for s in log.segments]
    clean(cleaner(m, clock), log)
    assert [s.size_bytes for s in log.segments] == [*sizes[:-1], log.segments[-1].size_bytes]
    assert log.clean_offset is None
    assert no_leftovers(log.directory)


def test_a_read_result_from_before_the_swap_still_reads_the_old_bytes(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    write(log, clock, 80, 5)
    early = log.read(0, 1 << 20)
    old_bytes = early.read_bytes()
    clean(cleaner(m, clock), log)
    assert early.read_bytes() == old_bytes
    assert log.read(0, 1 << 20).read_bytes() != old_bytes


def test_a_stopping_cleaner_abandons_its_pass(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    write(log, clock, 80, 5)
    c = cleaner(m, clock)
    c.shutdown()  # no thread: only sets the stop flag
    sizes = [s.size_bytes for s in log.segments]
    assert clean(c, log) is None
    assert [s.size_bytes for s in log.segments] == sizes
    assert no_leftovers(log.directory)


def test_io_throttle_slows_the_pass(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    write(log, clock, 100, 5)
    started = time.monotonic()
    result = clean(cleaner(m, clock, max_io_bytes_per_second=40_000.0), log)
    assert result is not None
    done = result.stats.bytes_read + result.stats.map_bytes_read
    assert time.monotonic() - started >= done / 40_000 - 0.05


def test_cleaner_thread_compacts_while_appends_and_reads_go_on(tmp_path: Path) -> None:
    """The reader starts at offset 0 again and again while the thread cleans underneath."""
    clock = Clock()
    config = dataclasses.replace(COMPACT, segment_bytes=600)
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    written: dict[int, bytes] = {}
    keys = 8
    c = cleaner(m, clock, backoff_ms=1)
    c.start()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(40):
                seen = read_all(log, start=0)
                offsets = [s.offset for s in seen]
                assert offsets == sorted(set(offsets)), "offsets must strictly increase"
                for s in seen:
                    assert written.get(s.offset, s.value) == s.value
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    try:
        written.update(write(log, clock, 200, keys))
        thread = threading.Thread(target=reader)
        thread.start()
        deadline = time.monotonic() + 20
        round_ = 0
        while round_ < 10 or (c.passes < 3 and time.monotonic() < deadline):
            written.update(write(log, clock, 40, keys, start=200 + 40 * round_))
            round_ += 1
            time.sleep(0.005)
        thread.join()
    finally:
        c.shutdown()
    assert not errors, errors[0]
    assert c.passes >= 3
    seen = read_all(log)
    last = {}
    for offset in sorted(written):
        last[b"k%d" % ((int(written[offset][1:])) % keys)] = offset
    assert {s.offset for s in seen} >= set(last.values())
    assert no_leftovers(log.directory)


def test_offset_map_memory_stays_within_the_dedupe_buffer() -> None:
    budget = 4 * 1024 * 1024
    tracemalloc.start()
    try:
        offsets = OffsetMap(budget, load_factor=0.9)
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        i = 0
        while offsets.room_for(1):
            offsets.put(b"key-number-%012d-with-a-long-tail" % i, 10**12 + i)
            i += 1
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert i == offsets.capacity > 20_000
    assert peak <= budget * 0.9
    assert offsets.latest(b"key-number-%012d-with-a-long-tail" % 5) == 10**12 + 5
    assert offsets.latest(b"unknown") == -1
