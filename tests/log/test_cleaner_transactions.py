"""The cleaner on transactional data (Kafka's rules): aborted data goes whatever its keys,
markers stay while their transaction's data does and then until delete.retention.ms."""

from __future__ import annotations

from pathlib import Path

from strom.storage import PartitionLog
from strom.storage.log.txn_index import AbortedTxn
from strom.wire.records import Record, build_batch, iter_batches
from tests.log.compaction import COMPACT, clean, cleaner, keyed, read_all
from tests.log.helpers import T0, Clock, get_log, manager

A, B = 100, 200


def txn(
    log: PartitionLog, clock: Clock, pid: int, seq: int, entries: list[tuple[bytes, bytes]]
) -> int:
    records = [Record(k, v, (), T0 + i) for i, (k, v) in enumerate(entries)]
    data = build_batch(
        records, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True
    )
    return log.append(data, 0, clock()).base_offset


def end(log: PartitionLog, clock: Clock, pid: int, commit: bool, epoch: int = 0) -> int:
    return log.append_marker(pid, epoch, 0, commit, 0, clock()).base_offset


def roll(log: PartitionLog, clock: Clock, n: int = 30) -> None:
    """Plain writes to other keys, so everything before them leaves the active segment."""
    for i in range(n):
        log.append(keyed([(b"z%d" % i, b"x" * 40)], T0 + 500 + i), 0, clock())


def markers(log: PartitionLog) -> list[tuple[int, int, int, bool]]:
    """(offset, producer id, records, has delete horizon) of every control batch."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        if not result.size:
            break
        for header, _ in iter_batches(result.read_bytes(), allow_partial=False):
            if header.is_control:
                out.append(
                    (
                        header.base_offset,
                        header.producer_id,
                        header.record_count,
                        header.has_delete_horizon,
                    )
                )
            offset = header.next_offset
    return out


def test_aborted_data_goes_and_never_hides_a_committed_value(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    log.append(keyed([(b"k", b"committed")], T0), 0, clock())
    first = txn(log, clock, A, 0, [(b"k", b"aborted"), (b"j", b"aborted")])
    abort = end(log, clock, A, commit=False)
    roll(log, clock)
    assert log.aborted_transactions(0, 100) == [AbortedTxn(A, first, abort, abort + 1)]
    clean(cleaner(m, clock), log)
    seen = [(s.offset, s.key, s.value) for s in read_all(log) if not s.batch.is_control]
    assert (0, b"k", b"committed") in seen  # the aborted later value did not supersede it
    assert all(value != b"aborted" for _, _, value in seen)
    # the marker stays (data of its transaction was seen in this pass), and its index entry
    assert [m_[0] for m_ in markers(log)] == [abort]
    assert log.aborted_transactions(0, 100) == [AbortedTxn(A, first, abort, abort + 1)]


def test_markers_get_a_horizon_then_go(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    txn(log, clock, A, 0, [(b"a", b"1")])
    abort = end(log, clock, A, commit=False)
    txn(log, clock, B, 0, [(b"b", b"1")])
    commit = end(log, clock, B, commit=True)
    log.append(keyed([(b"b", b"2")], T0 + 50), 0, clock())  # supersedes B's record
    # another batch from each producer, so the markers are not their newest entries
    txn(log, clock, A, 1, [(b"c", b"1")])
    end(log, clock, A, commit=True)
    txn(log, clock, B, 1, [(b"d", b"1")])
    end(log, clock, B, commit=True)
    roll(log, clock)
    c = cleaner(m, clock)
    clean(c, log)  # pass 1: A's data and B's superseded record go; both markers saw data
    assert [(o, h) for o, _, _, h in markers(log) if o in (abort, commit)] == [
        (abort, False),
        (commit, False),
    ]
    clean(c, log)  # pass 2: no data left for them: horizon = now + delete.retention.ms
    assert [(o, h) for o, _, _, h in markers(log) if o in (abort, commit)] == [
        (abort, True),
        (commit, True),
    ]
    assert log.aborted_transactions(0, abort + 1) == []  # nothing of A's left to skip
    clock.now += COMPACT.delete_retention_ms - 1
    clean(c, log)
    assert {o for o, *_ in markers(log)} >= {abort, commit}
    clock.now += 1
    clean(c, log)
    assert not {o for o, *_ in markers(log)} & {abort, commit}


def test_a_producers_newest_marker_stays_empty(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    txn(log, clock, A, 0, [(b"a", b"1")])
    end(log, clock, A, commit=False, epoch=1)  # a bumped epoch: A has no data batch in it
    roll(log, clock)
    c = cleaner(m, clock)
    clean(c, log)
    clean(c, log)
    clock.now += COMPACT.delete_retention_ms
    clean(c, log)
    [(_, pid, records, _)] = markers(log)
    assert (pid, records) == (A, 0)  # kept, emptied: it holds A's epoch
    # and it reloads as such: an empty control batch changes no producer state
    m.close()
    log = get_log(manager([tmp_path], clock, COMPACT))
    assert [(p.producer_id, p.producer_epoch) for p in log.producers() if p.producer_id == A] == [
        (A, 1)
    ]


def test_the_cleaner_stops_at_the_last_stable_offset(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock, COMPACT)
    log = m.create("t", 0, COMPACT)
    log.append(keyed([(b"k", b"old")], T0), 0, clock())
    open_at = txn(log, clock, A, 0, [(b"x", b"1")])
    roll(log, clock)
    log.append(keyed([(b"k", b"new")], T0 + 900), 0, clock())
    roll(log, clock)
    result = clean(cleaner(m, clock), log)
    assert result is not None
    assert result.map_end <= open_at == log.last_stable_offset
    assert any(s.value == b"old" for s in read_all(log))  # "new" is past the LSO: not mapped
