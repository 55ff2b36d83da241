"""Transactions in the partition log: producer checks, markers, the LSO, the aborted index,
snapshots, recovery, truncation, followers and retention."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from strom.storage import LogConfig
from strom.storage.log.partition import PartitionLog
from strom.storage.log.producer_snapshot import decode_snapshot, encode_snapshot
from strom.storage.log.producer_state import SENTINEL
from strom.storage.log.txn_index import AbortedTxn
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode
from strom.wire.records import iter_batches
from strom.wire.records.batch import BatchHeader
from tests.log.helpers import T0, Clock, batch, crash, decode_all, get_log, manager, open_log

A, B = 100, 200


def txn(log: PartitionLog, pid: int, seq: int, values: int = 1, epoch: int = 0) -> int:
    """Append a transactional batch; its base offset."""
    data = batch([b"x%d" % i for i in range(values)], pid=pid, epoch=epoch, seq=seq, transactional=True)
    return log.append(data, 0, T0).base_offset


def plain(log: PartitionLog, values: int = 1) -> int:
    return log.append(batch([b"p"] * values), 0, T0).base_offset


def marker(
    log: PartitionLog, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0, **kw: int
) -> int:
    return log.append_marker(pid, epoch, coordinator_epoch, commit, 0, T0, **kw).base_offset


def fails(error: ErrorCode, fn: object, *args: object, **kw: object) -> None:
    with pytest.raises(LogAppendError) as info:
        fn(*args, **kw)  # type: ignore[operator]
    assert info.value.error == error


def committed_read(log: PartitionLog, start: int = 0) -> tuple[list[bytes | None], list[AbortedTxn]]:
    """What a read_committed consumer gets from `start` to the LSO: the data records left
    after skipping aborted transactions the way Kafka's consumer does, and every aborted
    transaction the log reported."""
    offset, values, reported = start, [], []
    aborting: set[int] = set()
    pending: list[AbortedTxn] = []
    lso = log.last_stable_offset
    while offset < lso:
        result = log.read(offset, 1 << 20, max_offset=lso, aborted=True)
        if not result.size:
            break
        assert result.aborted_transactions is not None
        reported += result.aborted_transactions
        pending = sorted(pending + result.aborted_transactions, key=lambda t: t.first_offset)
        for _, view in iter_batches(result.read_bytes(), allow_partial=False):
            header = BatchHeader.parse(view)
            while pending and pending[0].first_offset <= header.last_offset:
                aborting.add(pending.pop(0).producer_id)
            if header.is_control:
                aborting.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in aborting):
                values += [v for o, v in decode_all(bytes(view)) if o >= offset]
            offset = header.last_offset + 1
    return values, reported


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    return open_log(tmp_path / "t-0")


def test_open_transaction_holds_the_lso(log: PartitionLog) -> None:
    plain(log)
    first = txn(log, A, 0)
    plain(log)
    assert (log.high_watermark, log.last_stable_offset) == (3, first)
    assert log.producers()[0].current_txn_start_offset == first
    marker(log, A, commit=True)
    assert log.last_stable_offset == log.high_watermark == 4
    assert committed_read(log) == ([b"p", b"x0", b"p"], [])


def test_abort_is_indexed_and_skipped(log: PartitionLog) -> None:
    first = txn(log, A, 0, values=2)
    txn(log, B, 0)
    plain(log)
    end = marker(log, A, commit=False)
    assert log.last_stable_offset == 2  # B is still open
    [segment] = log._segments
    assert segment.txn_index.entries() == [AbortedTxn(A, first, end, 2)]
    marker(log, B, commit=True)
    values, reported = committed_read(log)
    assert values == [b"x0", b"p"]  # B's record and the plain one
    assert reported == [AbortedTxn(A, first, end, 2)]


def test_read_uncommitted_reports_nothing(log: PartitionLog) -> None:
    txn(log, A, 0)
    marker(log, A, commit=False)
    assert log.read(0, 1 << 20).aborted_transactions is None
    assert log.read(0, 1 << 20, aborted=True).aborted_transactions == [AbortedTxn(A, 0, 1, 2)]
    assert log.read(2, 1 << 20, aborted=True).aborted_transactions == []  # nothing read


def test_non_transactional_batch_during_a_transaction(log: PartitionLog) -> None:
    txn(log, A, 0)
    fails(ErrorCode.INVALID_TXN_STATE, log.append, batch([b"i"], pid=A, epoch=0, seq=1), 0, T0)


def test_epoch_fencing(log: PartitionLog) -> None:
    txn(log, A, 0, epoch=3)
    fails(ErrorCode.INVALID_PRODUCER_EPOCH, txn, log, A, 1, epoch=2)
    fails(ErrorCode.INVALID_PRODUCER_EPOCH, marker, log, A, True, epoch=2)
    # a newer epoch (the coordinator fenced the producer) aborts the open transaction
    end = marker(log, A, commit=False, epoch=4)
    assert log.producers()[0].producer_epoch == 4
    assert log.last_stable_offset == end + 1
    fails(ErrorCode.INVALID_PRODUCER_EPOCH, txn, log, A, 0, epoch=3)


def test_stale_coordinator_epoch_is_fenced(log: PartitionLog) -> None:
    txn(log, A, 0)
    marker(log, A, commit=True, coordinator_epoch=5)
    txn(log, A, 1)
    fails(ErrorCode.TRANSACTION_COORDINATOR_FENCED, marker, log, A, True, coordinator_epoch=4)
    marker(log, A, commit=True, coordinator_epoch=5)
    assert log.producers()[0].coordinator_epoch == 5


def test_marker_for_an_unknown_producer_is_written_and_ends_nothing(log: PartitionLog) -> None:
    plain(log)
    offset = marker(log, 999, commit=False, epoch=7, coordinator_epoch=2)
    assert offset == 1
    assert log.last_stable_offset == 2
    assert log._segments[0].txn_index.count == 0
    [info] = [p for p in log.producers() if p.producer_id == 999]
    assert (info.producer_epoch, info.coordinator_epoch, info.current_txn_start_offset) == (7, 2, -1)


def test_transactions_v2_markers_need_a_bumped_epoch(log: PartitionLog) -> None:
    txn(log, A, 0, epoch=1)
    fails(ErrorCode.INVALID_PRODUCER_EPOCH, marker, log, A, True, epoch=1, transaction_version=2)
    marker(log, A, commit=True, epoch=2, transaction_version=2)
    # the same marker again (a retry after a lost answer) is written, ending nothing
    marker(log, A, commit=True, epoch=2, transaction_version=2)
    assert log.last_stable_offset == log.log_end_offset
    # the next transaction runs at the bumped epoch from sequence 0
    txn(log, A, 0, epoch=2)
    fails(ErrorCode.INVALID_PRODUCER_EPOCH, marker, log, A, False, epoch=2, transaction_version=2)


def test_replicated_log_keeps_the_lso_until_the_marker_is_committed(log: PartitionLog) -> None:
    log.high_watermark_follows_appends = False
    first = txn(log, A, 0)
    end = marker(log, A, commit=True)
    log.update_high_watermark(end)  # the marker itself is not committed yet
    assert log.last_stable_offset == first
    log.update_high_watermark(end + 1)
    assert log.last_stable_offset == end + 1


def test_verification_guard(log: PartitionLog) -> None:
    guard = log.start_verification(A, 0, 0, supports_epoch_bump=False)
    assert guard is not None
    # a guard that is not the current one (here: the sentinel) does not let a transaction start
    fails(
        ErrorCode.INVALID_TXN_STATE,
        log.append,
        batch([b"x"], pid=A, epoch=0, seq=0, transactional=True),
        0,
        T0,
        verification=SENTINEL,
    )
    log.append(batch([b"x"], pid=A, epoch=0, seq=0, transactional=True), 0, T0, verification=guard)
    assert log.start_verification(A, 1, 0, supports_epoch_bump=False) is None  # ongoing now
    log.append(batch([b"y"], pid=A, epoch=0, seq=1, transactional=True), 0, T0, verification=SENTINEL)
    # a guard handed out before a marker is spent by it (the ABA race)
    marker(log, A, commit=False)
    stale = log.start_verification(A, 2, 0, supports_epoch_bump=False)
    assert stale is not None
    marker(log, A, commit=False)
    fails(
        ErrorCode.INVALID_TXN_STATE,
        log.append,
        batch([b"z"], pid=A, epoch=0, seq=2, transactional=True),
        0,
        T0,
        verification=stale,
    )


def test_verification_waits_for_the_previous_transactions_marker(log: PartitionLog) -> None:
    """Transactions v2 (KAFKA-18575): the next transaction's first batch, one epoch up, can
    arrive before the previous transaction's marker; it is refused (retriable) until the
    marker is here, and never appended into the previous transaction."""
    txn(log, A, 0, epoch=0)
    fails(ErrorCode.CONCURRENT_TRANSACTIONS, log.start_verification, A, 0, 1, True)
    # appended anyway, it would join the open transaction: the log refuses it
    fails(
        ErrorCode.INVALID_TXN_STATE,
        log.append,
        batch([b"next"], pid=A, epoch=1, seq=0, transactional=True),
        0,
        T0,
        verification=SENTINEL,
    )
    marker(log, A, commit=False, epoch=1, transaction_version=2)
    guard = log.start_verification(A, 0, 1, supports_epoch_bump=True)
    assert guard is not None
    log.append(batch([b"next"], pid=A, epoch=1, seq=0, transactional=True), 0, T0, verification=guard)
    assert log.start_verification(A, 1, 1, supports_epoch_bump=True) is None
    # an older epoch is refused before the coordinator is asked, and at the append
    fails(ErrorCode.INVALID_PRODUCER_EPOCH, log.start_verification, A, 5, 0, True)
    fails(
        ErrorCode.INVALID_PRODUCER_EPOCH,
        log.append,
        batch([b"old"], pid=A, epoch=0, seq=5, transactional=True),
        0,
        T0,
        verification=SENTINEL,
    )


def test_verification_of_a_v2_producer_without_state_needs_sequence_zero(log: PartitionLog) -> None:
    guard = log.start_verification(A, 5, 0, supports_epoch_bump=True)
    assert guard is not None
    fails(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        log.append,
        batch([b"x"], pid=A, epoch=0, seq=5, transactional=True),
        0,
        T0,
        verification=guard,
    )


def test_transaction_spanning_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=200))
    first = txn(log, A, 0)
    for _ in range(5):
        plain(log)
    end = marker(log, A, commit=False)
    assert len(log._segments) > 2
    assert log._segments[0].txn_index.count == 0
    assert log._segments[-1].txn_index.entries() == [AbortedTxn(A, first, end, end + 1)]
    values, reported = committed_read(log)
    assert values == [b"p"] * 5
    assert set(reported) == {AbortedTxn(A, first, end, end + 1)}  # each read overlapping it
    # a fetch of the first segment alone still learns of the abort (its marker is later)
    assert log.aborted_transactions(0, 1) == [AbortedTxn(A, first, end, end + 1)]
    assert log.aborted_transactions(end + 1, end + 5) == []


def test_clean_restart_keeps_open_transactions_and_the_index(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    txn(log, A, 0)
    marker(log, A, commit=False)
    open_at = txn(log, B, 0)
    m.close()
    log = get_log(manager([tmp_path]))
    assert log.last_stable_offset == open_at
    assert log.aborted_transactions(0, 10) == [AbortedTxn(A, 0, 1, 2)]
    marker(log, B, commit=True)
    assert log.last_stable_offset == log.log_end_offset


def test_crash_rebuilds_the_index_and_open_transactions(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=250)
    clock = Clock()
    m = manager([tmp_path], clock, config)
    log = m.create("t", 0, config)
    first = txn(log, A, 0)
    plain(log, 3)
    plain(log, 3)
    end = marker(log, A, commit=False)
    open_at = txn(log, B, 0)
    plain(log)
    assert len(log._segments) > 1
    expected = [AbortedTxn(A, first, end, open_at)]
    assert log.aborted_transactions(0, 100) == expected
    crash(m)  # nothing flushed: no snapshot, no index written
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        os.unlink(path)
    log = get_log(manager([tmp_path], clock, config))
    assert log.aborted_transactions(0, 100) == expected
    assert log.last_stable_offset == open_at
    assert committed_read(log)[0] == [b"p"] * 6


def test_corrupt_index_is_rebuilt_after_a_clean_stop(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    txn(log, A, 0)
    marker(log, A, commit=False)
    m.close()
    [path] = (tmp_path / "t-0").glob("*.txnindex")
    path.write_bytes(path.read_bytes()[:-3])
    log = get_log(manager([tmp_path]))
    assert log.aborted_transactions(0, 10) == [AbortedTxn(A, 0, 1, 2)]


def test_snapshot_versions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.high_watermark_follows_appends = False
    txn(log, A, 0)
    end = marker(log, A, commit=False)
    open_at = txn(log, B, 0)
    path = log.producer_state.write_snapshot(log.log_end_offset)
    entries, unreplicated = decode_snapshot(path.read_bytes())
    assert {e.producer_id: e.current_txn_first_offset for e in entries} == {A: -1, B: open_at}
    assert [(t.producer_id, t.last_offset) for t in unreplicated] == [(A, end)]
    # a version 1 snapshot (before transactions were tracked) still loads
    old = encode_snapshot(entries, version=1)
    assert decode_snapshot(old) == (entries, [])
    path.write_bytes(old)
    log.producer_state.load_latest_snapshot(log.log_end_offset)
    assert log.producer_state.txns.first_undecided_offset() == open_at


def test_truncation_rolls_transactions_back(log: PartitionLog) -> None:
    first = txn(log, A, 0)
    end = marker(log, A, commit=False)
    plain(log)
    assert log.last_stable_offset == log.log_end_offset
    log.truncate_to(end)
    assert log.last_stable_offset == first  # the abort is gone: the transaction is open again
    assert log.aborted_transactions(0, 10) == []
    assert log.producers()[0].current_txn_start_offset == first
    marker(log, A, commit=True)
    assert committed_read(log) == ([b"x0"], [])


def test_follower_builds_the_same_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    txn(leader, A, 0)
    txn(leader, B, 0)
    marker(leader, A, commit=False)
    plain(leader)
    follower = open_log(tmp_path / "follower")
    follower.high_watermark_follows_appends = False
    follower.append_replicated(leader.read(0, 1 << 20).read_bytes(), T0)
    follower.update_high_watermark(leader.high_watermark)
    assert follower.last_stable_offset == leader.last_stable_offset == 1
    assert follower.aborted_transactions(0, 10) == leader.aborted_transactions(0, 10)
    assert follower._segments[0].txn_index.entries() == leader._segments[0].txn_index.entries()
    # the follower, promoted, accepts the next marker like the leader would
    follower.high_watermark_follows_appends = True
    fails(ErrorCode.INVALID_PRODUCER_EPOCH, marker, follower, B, True, epoch=-1)
    marker(follower, B, commit=True)
    assert follower.last_stable_offset == follower.log_end_offset


def test_retention_stops_at_the_high_watermark(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=200, retention_ms=1000)
    log = open_log(tmp_path / "t-0", config, clock)
    log.high_watermark_follows_appends = False
    for _ in range(6):
        plain(log)
    log.update_high_watermark(3)
    clock.now = T0 + 10_000
    log.enforce_retention(clock.now)
    assert log.log_start_offset <= log.high_watermark == 3
    bases = [s.base_offset for s in log._segments]
    assert bases[0] <= 3


def test_retention_past_an_open_transaction_holds_the_lso_at_the_log_start(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=200, retention_ms=1000)
    log = open_log(tmp_path / "t-0", config, clock)
    txn(log, A, 0)
    for _ in range(6):
        plain(log)
    clock.now = T0 + 10_000
    assert log.enforce_retention(clock.now) > 0
    assert log.log_start_offset > 0
    assert log.last_stable_offset == log.log_start_offset
    assert log.producers()[0].current_txn_start_offset == 0  # the producer state stays
    assert log.expire_producers(clock.now + 10**9, 1) == 0  # an open transaction never expires


def test_delete_records_past_an_open_transaction(log: PartitionLog) -> None:
    first = txn(log, A, 0)
    plain(log, 3)
    assert log.delete_records_before(3) == 3  # below the high watermark: allowed, as in Kafka
    assert log.last_stable_offset == 3  # the LSO waits at the log start
    assert log.producers()[0].current_txn_start_offset == first
    end = marker(log, A, commit=False)
    assert log.last_stable_offset == end + 1
    # the abort is still reported to a consumer reading from the new start
    assert log.aborted_transactions(3, end + 1) == [AbortedTxn(A, first, end, end + 1)]


def test_a_marker_above_the_high_watermark_holds_the_lso_across_a_restart(tmp_path: Path) -> None:
    """Snapshot version 2 keeps the ended transaction whose marker the high watermark had not
    passed: after a restart, back at its checkpointed high watermark, the replica's LSO is still
    held (even if something read the LSO before the high watermark was restored)."""
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    log.high_watermark_follows_appends = False
    first = txn(log, A, 0)
    end = marker(log, A, commit=True)
    log.update_high_watermark(end)
    assert log.last_stable_offset == first
    m.close()
    log = get_log(manager([tmp_path]))
    assert log.checkpointed_high_watermark == end
    log.clean_view()  # the cleaner may look before the replica's role is set
    log.restore_high_watermark()
    assert log.high_watermark == end
    assert log.last_stable_offset == first
    log.update_high_watermark(end + 1)
    assert log.last_stable_offset == end + 1
