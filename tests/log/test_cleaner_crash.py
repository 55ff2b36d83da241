"""A crash at every file-system step of a cleaning pass or a segment deletion loses nothing.

Each test counts the mutating system calls (open, write, fsync, replace, unlink,
ftruncate) one pass makes, then repeats it on a fresh log once per step,
killing it just before that step: a `Killed` exception (a BaseException, so no
cleanup handler runs) stands for kill -9, after which the log is dropped without
flushing or checkpointing and reloaded as after an unclean shutdown.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from strom.storage import LogManager, PartitionLog
from strom.wire.records import Codec, Record, build_batch
from tests.log.compaction import COMPACT, clean, cleaner, keyed, read_all
from tests.log.helpers import T0, Clock, crash, manager
from tests.log.test_transactions import committed_read

CONFIG = dataclasses.replace(COMPACT, cleanup_policy=("compact", "delete"), retention_ms=1000)
MUTATING = ("open", "write", "fsync", "replace", "unlink", "ftruncate")


class Killed(BaseException):
    """The process died here."""


@contextmanager
def kill_at(step: int | None, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Count mutating os calls; raise Killed instead of performing call number `step`."""
    calls: list[str] = []

    def wrap(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            if step is not None and len(calls) == step:
                raise Killed(f"killed before {name}{args[:2]}")
            calls.append(name)
            return real(*args, **kwargs)

        return call

    with monkeypatch.context() as patch:
        for name in MUTATING:
            patch.setattr(os, name, wrap(name, getattr(os, name)))
        yield calls


Written = dict[int, tuple[bytes, bytes | None]]


def build(root: Path, clock: Clock) -> tuple[LogManager, PartitionLog, Written]:
    m = manager([root], clock, CONFIG)
    log = m.create("t", 0, CONFIG)
    written: Written = {}
    codecs = list(Codec)
    for i in range(60):
        key = b"k%d" % (i % 9)
        value = None if i % 13 == 5 else b"value-%d" % i
        entries = [(key, value), (b"x%d" % (i % 4), b"w%d" % i)]
        result = log.append(keyed(entries, T0 + i, codec=codecs[i % len(codecs)]), 0, clock())
        for n, entry in enumerate(entries):
            written[result.base_offset + n] = entry
    return m, log, written


def reload(m: LogManager, root: Path, clock: Clock) -> tuple[LogManager, PartitionLog]:
    """Drop `m` as kill -9 would, then open the directory again."""
    crash(m)
    m = manager([root], clock, CONFIG)
    again = m.get("t", 0)
    assert again is not None
    assert not [p for p in again.directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    return m, again


def assert_nothing_lost(log: PartitionLog, written: Written, floor: int = 0) -> None:
    seen = read_all(log)
    offsets = [s.offset for s in seen]
    assert offsets == sorted(set(offsets))
    for s in seen:
        assert written[s.offset] == (s.key, s.value)
    latest = {}
    for offset, (key, value) in sorted(written.items()):
        latest[key] = (offset, value)
    visible = {(s.offset, s.key, s.value) for s in seen}
    for key, (offset, value) in latest.items():
        if offset >= floor:
            assert (offset, key, value) in visible, f"lost {key!r} at {offset}"


def test_kill_at_every_step_of_a_cleaning_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    m, log, written = build(tmp_path / "reference", clock)
    with kill_at(None, monkeypatch) as calls:
        clean(cleaner(m, clock), log)
    reference = [(s.offset, s.key, s.value) for s in read_all(log)]
    assert {"replace", "unlink", "fsync", "write"} <= set(calls)
    for step in range(len(calls)):
        root = tmp_path / f"step-{step}"
        m, log, written = build(root, clock)
        with pytest.raises(Killed), kill_at(step, monkeypatch):
            clean(cleaner(m, clock), log)
        m, again = reload(m, root, clock)
        assert_nothing_lost(again, written)
        # The next pass finishes the job exactly as an uninterrupted one did.
        clean(cleaner(m, clock), again)
        assert [(s.offset, s.key, s.value) for s in read_all(again)] == reference, step


@pytest.mark.parametrize("how", ["retention", "delete_records"])
def test_kill_at_every_step_of_a_segment_deletion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    clock = Clock(T0 + 10_000)

    def delete(log: PartitionLog) -> int:
        if how == "retention":
            return log.enforce_retention(T0 + 1040)  # the first ~40 records are past retention.ms
        return log.delete_records_before(71)

    m, log, _ = build(tmp_path / "count", clock)
    with kill_at(None, monkeypatch) as calls:
        delete(log)
    target = log.log_start_offset
    assert target > 0
    assert "unlink" in calls
    for step in range(len(calls)):
        root = tmp_path / f"step-{step}"
        m, log, written = build(root, clock)
        with pytest.raises(Killed), kill_at(step, monkeypatch):
            delete(log)
        _, again = reload(m, root, clock)
        seen = read_all(again)
        assert again.log_start_offset <= target
        # Whatever survives is a contiguous suffix of what was written: nothing at or past the
        # new log start is missing.
        assert [s.offset for s in seen] == list(range(seen[0].offset, again.log_end_offset))
        assert seen[0].offset <= target
        assert_nothing_lost(again, written, floor=target)


def build_transactional(root: Path, clock: Clock) -> tuple[LogManager, PartitionLog, set[bytes]]:
    """Keyed writes with transactions of two producers interleaved, every third one aborted;
    the values of the aborted ones."""
    m = manager([root], clock, CONFIG)
    log = m.create("t", 0, CONFIG)
    aborted: set[bytes] = set()
    seqs = {7: 0, 8: 0}
    open_values: dict[int, list[bytes]] = {7: [], 8: []}
    for i in range(60):
        pid = 7 + i % 2
        value = b"t%d" % i
        records = [Record(b"k%d" % (i % 9), value, (), T0 + i)]
        txn = build_batch(
            records, producer_id=pid, producer_epoch=0, base_sequence=seqs[pid], transactional=True
        )
        log.append(txn, 0, clock())
        seqs[pid] += 1
        open_values[pid].append(value)
        log.append(keyed([(b"x%d" % (i % 4), b"w%d" % i)], T0 + i), 0, clock())
        if i % 4 == 3:
            commit = i % 3 != 0
            log.append_marker(pid, 0, 0, commit, 0, clock())
            if not commit:
                aborted.update(open_values[pid])
            open_values[pid] = []
    for pid in (7, 8):
        log.append_marker(pid, 0, 0, True, 0, clock())
    for i in range(20):  # roll everything above out of the active segment
        log.append(keyed([(b"z%d" % i, b"x" * 40)], T0 + 100 + i), 0, clock())
    return m, log, aborted


def test_kill_at_every_step_of_a_transactional_cleaning_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cleaned segments' `.txnindex` goes through the swap too (or is rebuilt after a
    crash): a read_committed consumer of the reloaded log never sees an aborted value."""
    clock = Clock()
    m, log, aborted = build_transactional(tmp_path / "reference", clock)
    assert aborted
    with kill_at(None, monkeypatch) as calls:
        clean(cleaner(m, clock), log)
    reference, _ = committed_read(log)
    assert not set(reference) & aborted
    for step in range(0, len(calls), 3):
        root = tmp_path / f"step-{step}"
        m, log, aborted = build_transactional(root, clock)
        before, _ = committed_read(log)
        with pytest.raises(Killed), kill_at(step, monkeypatch):
            clean(cleaner(m, clock), log)
        m, again = reload(m, root, clock)
        seen, _ = committed_read(again)
        assert not set(seen) & aborted, step
        assert set(reference) <= set(seen) <= set(before), step
        clean(cleaner(m, clock), again)
        assert committed_read(again)[0] == reference, step
