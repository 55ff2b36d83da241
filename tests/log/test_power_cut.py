"""A power cut loses what the partition log had not flushed, and nothing else.

The log runs on a `MemoryDisk`, which knows what each fsync made durable. After random
appends, flushes, checkpoints and segment rolls the power goes out (unsynced bytes lost or
kept in part, the last write maybe torn, unsynced names lost or kept), and the log is opened
again as after any unclean shutdown: every record below the last flush is back, every record
it holds is the one written at that offset, and its offsets have no gap.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.storage import LogConfig, disk
from strom.storage.disk.memory import MemoryDisk
from tests.log.helpers import Clock, batch, crash, get_log, manager, read_everything

ROOT = Path("/broker/data")
CONFIG = dataclasses.replace(LogConfig(), segment_bytes=700, index_interval_bytes=100)


@pytest.fixture
def memory() -> Iterator[MemoryDisk]:
    on = MemoryDisk()
    previous = disk.use(on)
    try:
        yield on
    finally:
        disk.use(previous)


def _durable_root(memory: MemoryDisk) -> None:
    disk.makedirs(ROOT)
    for path in (Path("/"), Path("/broker"), ROOT):
        disk.fsync_path(path)


Step = tuple[str, int]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("flush"), st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(steps, st.integers(0, 2**32), st.sampled_from(["random", "none"]))
def test_a_power_cut_loses_only_what_was_not_flushed(
    script: list[Step], seed: int, keep: str
) -> None:
    memory = MemoryDisk()
    previous = disk.use(memory)
    try:
        _run(memory, script, seed, keep)
    finally:
        disk.use(previous)


def _run(memory: MemoryDisk, script: list[Step], seed: int, keep: str) -> None:
    _durable_root(memory)
    clock = Clock()
    m = manager([ROOT], clock, CONFIG)
    log = m.create("t", 0, CONFIG)
    written: dict[int, bytes] = {}
    flushed = 0
    counter = 0
    for kind, count in script:
        clock.now += 7
        if kind == "append":
            values = [b"value-%d" % (counter + i) for i in range(count)]
            counter += count
            result = log.append(batch(values, ts=clock.now), 0, clock())
            for n, value in enumerate(values):
                written[result.base_offset + n] = value
        elif kind == "flush":
            log.flush()
            flushed = log.log_end_offset
        elif kind == "checkpoint":
            m.checkpoint()
        else:  # a clean restart in between
            m.close()
            m = manager([ROOT], clock, CONFIG)
            found = m.get("t", 0)
            assert found is not None
            log = found
            flushed = log.log_end_offset  # a clean close flushed everything
    crash(m)
    memory.power_cut(random.Random(seed), Path("/"), keep=keep)
    again = manager([ROOT], clock, CONFIG).get("t", 0)
    if again is None:
        assert flushed == 0, "the partition vanished after a flush"
        return
    records = read_everything(again)
    offsets = [offset for offset, _ in records]
    assert offsets == list(range(again.log_start_offset, again.log_end_offset))
    for offset, held in records:
        assert written[offset] == held, f"offset {offset} holds {held!r}"
    assert again.log_end_offset >= flushed, (again.log_end_offset, flushed)


def test_an_unflushed_log_may_lose_everything_but_stays_readable(memory: MemoryDisk) -> None:
    _durable_root(memory)
    clock = Clock()
    m = manager([ROOT], clock, CONFIG)
    log = m.create("t", 0, CONFIG)
    for i in range(20):
        log.append(batch([b"v%d" % i]), 0, clock())
    log.flush()
    for i in range(20, 40):
        log.append(batch([b"v%d" % i]), 0, clock())
    crash(m)
    memory.power_cut(random.Random(5), Path("/"), keep="none")
    again = manager([ROOT], clock, CONFIG).get("t", 0)
    assert again is not None
    assert again.log_end_offset == 20
    assert [v for _, v in read_everything(again)] == [b"v%d" % i for i in range(20)]


def test_a_log_created_before_a_crash_survives_a_power_cut_after_its_flush(
    memory: MemoryDisk,
) -> None:
    """kill -9 before the new log's first flush leaves its directory's name only in the page
    cache; the next incarnation loads it from there, so its first flush must sync that name
    too, or a later power cut loses the whole partition, flushed records and all (found by the
    whole-cluster simulation, seed 121)."""
    _durable_root(memory)
    clock = Clock()
    m = manager([ROOT], clock, CONFIG)
    m.create("t", 0, CONFIG)
    crash(m)
    m = manager([ROOT], clock, CONFIG)
    log = m.get("t", 0)
    assert log is not None
    for i in range(5):
        log.append(batch([b"v%d" % i]), 0, clock())
    log.flush()
    crash(m)
    memory.power_cut(random.Random(1), Path("/"), keep="none")
    again = manager([ROOT], clock, CONFIG).get("t", 0)
    assert again is not None, "the partition vanished after a flush"
    assert [v for _, v in read_everything(again)] == [b"v%d" % i for i in range(5)]


def test_a_tail_loaded_from_the_page_cache_is_synced_when_flush_messages_asks(
    memory: MemoryDisk,
) -> None:
    """A replica's last incarnation wrote records it never synced (kill -9, or its fsync
    failed); the next one loads them from the page cache. With flush.messages=1 it syncs them
    at once, before any fetch reports them: a follower rejoined the ISR with such a tail, and a
    whole-cluster power cut then lost a transaction's ABORT marker that every other replica
    had truncated to it (found by the whole-cluster simulation, seed 4814)."""
    _durable_root(memory)
    clock = Clock()
    every = dataclasses.replace(CONFIG, flush_messages=1)
    m = manager([ROOT], clock, every)
    log = m.create("t", 0, every)
    log.append(batch([b"v0"]), 0, clock())
    log.flush()
    for i in range(1, 4):
        log.append(batch([b"v%d" % i]), 0, clock())  # not flushed: killed first
    crash(m)
    m = manager([ROOT], clock, every)
    assert get_log(m, "t").log_end_offset == 4
    crash(m)
    memory.power_cut(random.Random(3), Path("/"), keep="none")
    again = manager([ROOT], clock, every).get("t", 0)
    assert again is not None
    assert [v for _, v in read_everything(again)] == [b"v%d" % i for i in range(4)]
