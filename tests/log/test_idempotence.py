"""Idempotent producers: duplicates, sequence gaps, epochs, wrap-around, snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.storage import LogAppendError, LogConfig, PartitionLog
from strom.storage.log.producer_entry import INT32_MAX
from strom.storage.log.producer_snapshot import decode_snapshot
from strom.wire.errors import ErrorCode
from tests.log.helpers import T0, Clock, batch, crash, get_log, manager, open_log, read_everything

PID = 1000


def send(
    log: PartitionLog, seq: int, n: int = 1, epoch: int = 0, pid: int = PID
) -> tuple[int, int, bool]:
    r = log.append(
        batch([b"s%d" % (seq + i) for i in range(n)], pid=pid, epoch=epoch, seq=seq), 0, T0
    )
    return r.base_offset, r.last_offset, r.duplicate


def fails(log: PartitionLog, seq: int, code: ErrorCode, n: int = 1, epoch: int = 0) -> None:
    end = log.log_end_offset
    with pytest.raises(LogAppendError) as info:
        send(log, seq, n, epoch)
    assert info.value.error == code
    assert log.log_end_offset == end


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    return open_log(tmp_path / "t-0")


def test_retried_batch_returns_original_offsets_and_is_not_rewritten(log: PartitionLog) -> None:
    assert send(log, 0, 2) == (0, 1, False)
    assert send(log, 2, 3) == (2, 4, False)
    log.append(batch([b"other"]), 0, T0)
    size = log.size_bytes()
    assert send(log, 0, 2) == (0, 1, True)
    assert send(log, 2, 3) == (2, 4, True)
    assert log.size_bytes() == size
    assert log.log_end_offset == 6


def test_only_last_five_batches_are_deduplicated(log: PartitionLog) -> None:
    for i in range(6):
        send(log, i)
    assert send(log, 5) == (5, 5, True)
    assert send(log, 1) == (1, 1, True)
    fails(log, 0, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


def test_sequence_gap_is_out_of_order(log: PartitionLog) -> None:
    send(log, 0, 3)
    fails(log, 4, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    fails(log, 1, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, n=3)  # overlaps, not an exact retry
    assert send(log, 3) == (3, 3, False)


def test_stale_epoch_is_fenced(log: PartitionLog) -> None:
    send(log, 0, epoch=3)
    fails(log, 1, ErrorCode.INVALID_PRODUCER_EPOCH, epoch=2)


def test_new_epoch_must_start_at_zero(log: PartitionLog) -> None:
    send(log, 0, 2, epoch=0)
    fails(log, 2, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, epoch=1)
    assert send(log, 0, epoch=1) == (2, 2, False)
    # A retry of an old-epoch batch is now fenced, not a duplicate.
    fails(log, 0, ErrorCode.INVALID_PRODUCER_EPOCH, n=2, epoch=0)


def test_unknown_producer_is_accepted_at_any_sequence(log: PartitionLog) -> None:
    """Kafka since KIP-360: no state (e.g. removed by retention) means accept, not UNKNOWN_PRODUCER_ID."""
    assert send(log, 77) == (0, 0, False)
    assert send(log, 78) == (1, 1, False)
    fails(log, 80, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


def test_sequence_wraps_at_int32_max(log: PartitionLog) -> None:
    send(log, INT32_MAX - 1, 2)
    assert log.producers()[0].last_sequence == INT32_MAX
    fails(log, INT32_MAX + 1 - 2**31 + 1, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert send(log, 0, 2) == (2, 3, False)
    assert log.producers()[0].last_sequence == 1


def test_batch_spanning_the_wrap_has_wrapped_last_sequence(log: PartitionLog) -> None:
    send(log, INT32_MAX - 1, 4)  # seqs MAX-1, MAX, 0, 1
    assert log.producers()[0].last_sequence == 1
    assert send(log, 2) == (4, 4, False)
    assert send(log, INT32_MAX - 1, 4) == (0, 3, True)


def test_independent_producers(log: PartitionLog) -> None:
    send(log, 0, pid=1)
    send(log, 0, pid=2)
    send(log, 1, pid=1)
    assert sorted((p.producer_id, p.last_sequence) for p in log.producers()) == [(1, 1), (2, 0)]


def test_describe_producers_fields(log: PartitionLog) -> None:
    send(log, 0, 3, epoch=4)
    (info,) = log.producers()
    assert (info.producer_id, info.producer_epoch, info.last_sequence) == (PID, 4, 2)
    assert info.last_timestamp == T0 + 2
    assert info.current_txn_start_offset == -1


def test_state_survives_clean_restart_via_snapshot(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    for seq in range(0, 6, 2):
        send(log, seq, 2)
    m.close()
    snapshots = sorted((tmp_path / "t-0").glob("*.snapshot"))
    assert snapshots[-1].name == "00000000000000000006.snapshot"
    entries, _ = decode_snapshot(snapshots[-1].read_bytes())
    assert [(e.producer_id, e.last_seq, len(e.batches)) for e in entries] == [(PID, 5, 3)]
    log = get_log(manager([tmp_path]))
    assert send(log, 4, 2) == (4, 5, True)
    fails(log, 7, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert send(log, 6) == (6, 6, False)


def test_state_rebuilt_by_replay_after_crash(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300)
    m = manager([tmp_path], config=config)
    log = m.create("t", 0, config)
    for seq in range(20):
        send(log, seq)
    assert len(log.segments) > 2  # rolls wrote snapshots; the tail must be replayed
    crash(m)
    log = get_log(manager([tmp_path], config=config))
    assert send(log, 19) == (19, 19, True)
    assert send(log, 20) == (20, 20, False)


def test_corrupt_snapshot_falls_back_to_older_one_and_replay(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300)
    m = manager([tmp_path], config=config)
    log = m.create("t", 0, config)
    for seq in range(20):
        send(log, seq)
    m.close()
    newest = sorted((tmp_path / "t-0").glob("*.snapshot"))[-1]
    newest.write_bytes(newest.read_bytes()[:-3])
    log = get_log(manager([tmp_path], config=config))
    assert send(log, 18) == (18, 18, True)
    assert send(log, 20) == (20, 20, False)


def test_expire_producers(log: PartitionLog) -> None:
    send(log, 0)
    assert log.expire_producers(T0 + 10, 100) == 0
    assert log.expire_producers(T0 + 100, 100) == 1
    assert log.producers() == []
    assert send(log, 5) == (1, 1, False)  # unknown again: any sequence


def test_duplicates_across_many_restarts(tmp_path: Path) -> None:
    clock = Clock()
    for round_ in range(3):
        m = manager([tmp_path], clock)
        log = m.create("t", 0, LogConfig())
        assert send(log, round_) == (round_, round_, False)
        assert send(log, round_) == (round_, round_, True)
        m.close()
    assert read_everything(open_log(tmp_path / "t-0")) == [(0, b"s0"), (1, b"s1"), (2, b"s2")]
