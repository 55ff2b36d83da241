"""The transaction coordinator state machine: Kafka's transitions, errors and edge cases."""

from __future__ import annotations

from strom.coordinator.groups.records import partition_for
from strom.coordinator.transactions.txn_api import EndResult, InitResult
from strom.coordinator.transactions.txn_log_records import parse_txn_record, txn_record
from strom.coordinator.transactions.txn_metadata import SHORT_MAX, TxnState
from strom.wire.errors import ErrorCode
from tests.transactions.txn_sim import TxnSim

T0, T1 = ("t", 0), ("t", 1)


def _begin(sim: TxnSim, txn: str = "x") -> InitResult:
    init = sim.init(txn)
    assert init.error == ErrorCode.NONE
    return init


# --- InitProducerId -------------------------------------------------------------------------------


def test_init_allocates_an_id_and_bumps_the_epoch_each_time() -> None:
    sim = TxnSim()
    first = _begin(sim)
    assert first.producer_epoch == 0
    again = sim.init("x")
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    [(_, latest)] = [(r.transactional_id, r.metadata) for r in sim.records()][-1:]
    assert latest is not None
    assert latest.state is TxnState.EMPTY
    assert latest.producer_epoch == 1


def test_init_refuses_bad_ids_and_timeouts() -> None:
    sim = TxnSim()
    assert sim.init("").error == ErrorCode.INVALID_REQUEST
    assert sim.init("x", timeout_ms=0).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert sim.init("x", timeout_ms=60_001).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert sim.init("x", timeout_ms=60_000).error == ErrorCode.NONE


def test_kip360_expected_producer_and_epoch() -> None:
    sim = TxnSim()
    init = _begin(sim)
    pid = init.producer_id
    bumped = sim.init("x", expected=(pid, 0))
    assert (bumped.error, bumped.producer_epoch) == (ErrorCode.NONE, 1)
    # a retry of that successful call (its answer was lost) gets the same epoch back
    retry = sim.init("x", expected=(pid, 0))
    assert (retry.error, retry.producer_epoch) == (ErrorCode.NONE, 1)
    assert sim.init("x", expected=(pid, 7)).error == ErrorCode.PRODUCER_FENCED
    assert sim.init("x", expected=(pid + 99, 1)).error == ErrorCode.PRODUCER_FENCED


def test_init_while_ongoing_fences_and_aborts_then_the_retry_bumps_again() -> None:
    sim = TxnSim()
    init = _begin(sim)
    pid, epoch = init.producer_id, init.producer_epoch
    assert sim.add("x", pid, epoch, T0, T1) == ErrorCode.NONE
    fenced = sim.init("x")
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    # the open transaction was aborted with the fenced epoch on every partition
    assert [(m.commit, m.producer_epoch) for m in sim.markers[T0]] == [(False, epoch + 1)]
    assert sim.metadata("x").state is TxnState.COMPLETE_ABORT
    # the zombie can no longer commit
    assert sim.end("x", pid, epoch, True).error == ErrorCode.PRODUCER_FENCED
    again = sim.init("x")
    assert (again.error, again.producer_epoch) == (ErrorCode.NONE, epoch + 2)


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.metadata("x").producer_epoch = SHORT_MAX - 1
    rotated = sim.init("x")
    assert rotated.error == ErrorCode.NONE
    assert rotated.producer_id != init.producer_id
    assert rotated.producer_epoch == 0
    assert sim.metadata("x").prev_producer_id == init.producer_id


def test_concurrent_transactions_while_a_write_is_in_flight() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.hold = True
    token = sim.machine.add_partitions(sim.now, "x", init.producer_id, 0, [T0], 99)
    assert token is None
    sim.settle()
    assert sim.init("x").error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert sim.end("x", init.producer_id, 0, True).error == ErrorCode.CONCURRENT_TRANSACTIONS
    sim.hold = False
    sim.complete_writes()
    assert sim.replies[99] == ErrorCode.NONE


# --- AddPartitionsToTxn and verification -----------------------------------------------------------


def test_add_partitions_errors() -> None:
    sim = TxnSim()
    init = _begin(sim)
    pid = init.producer_id
    assert sim.add("", pid, 0, T0) == ErrorCode.INVALID_REQUEST
    assert sim.add("y", pid, 0, T0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert sim.add("x", pid + 1, 0, T0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert sim.add("x", pid, 1, T0) == ErrorCode.PRODUCER_FENCED
    assert sim.add("x", pid, 0, T0) == ErrorCode.NONE
    written = len(sim.log[0])
    assert sim.add("x", pid, 0, T0) == ErrorCode.NONE
    assert len(sim.log[0]) == written  # already in: nothing written
    meta = sim.metadata("x")
    assert meta.state is TxnState.ONGOING
    assert meta.partitions == {T0}
    assert meta.start_ms == sim.now


def test_verify_partitions() -> None:
    sim = TxnSim()
    init = _begin(sim)
    pid = init.producer_id
    assert sim.add("x", pid, 0, T0) == ErrorCode.NONE
    assert sim.machine.verify_partitions("x", pid, 0, [T0, T1]) == {
        T0: ErrorCode.NONE,
        T1: ErrorCode.TRANSACTION_ABORTABLE,
    }
    assert sim.machine.verify_partitions("x", pid, 1, [T0]) == {T0: ErrorCode.PRODUCER_FENCED}
    assert sim.machine.verify_partitions("x", 5, 0, [T0]) == {
        T0: ErrorCode.INVALID_PRODUCER_ID_MAPPING
    }
    assert sim.machine.verify_partitions("", pid, 0, [T0]) == {T0: ErrorCode.INVALID_REQUEST}


# --- EndTxn, transactions v1 ---------------------------------------------------------------------


def test_commit_writes_markers_then_completes() -> None:
    sim = TxnSim()
    init = _begin(sim)
    pid = init.producer_id
    sim.add("x", pid, 0, T0, T1)
    sim.hold_markers = True
    ended = sim.end("x", pid, 0, True)
    assert ended == EndResult(ErrorCode.NONE)  # v1: no id or epoch in the answer
    meta = sim.metadata("x")
    assert meta.state is TxnState.PREPARE_COMMIT
    assert meta.pending is TxnState.COMPLETE_COMMIT
    # a retry while the markers are on their way
    assert sim.end("x", pid, 0, True).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert sim.add("x", pid, 0, T0) == ErrorCode.CONCURRENT_TRANSACTIONS
    sim.hold_markers = False
    sim.settle()
    assert [m.commit for m in sim.markers[T0]] == [True]
    assert [m.commit for m in sim.markers[T1]] == [True]
    assert sim.metadata("x").state is TxnState.COMPLETE_COMMIT
    assert meta.partitions == set()
    states = [r.metadata.state for r in sim.records() if r.metadata is not None]
    assert states[-2:] == [TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    # a retry after completion succeeds; the opposite outcome is INVALID_TXN_STATE
    assert sim.end("x", pid, 0, True).error == ErrorCode.NONE
    assert sim.end("x", pid, 0, False).error == ErrorCode.INVALID_TXN_STATE
    # the next transaction may start
    assert sim.add("x", pid, 0, T1) == ErrorCode.NONE


def test_end_errors_v1() -> None:
    sim = TxnSim()
    init = _begin(sim)
    pid = init.producer_id
    assert sim.end("x", pid, 0, True).error == ErrorCode.INVALID_TXN_STATE  # Empty
    assert sim.end("y", pid, 0, True).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert sim.end("", pid, 0, True).error == ErrorCode.INVALID_REQUEST
    sim.add("x", pid, 0, T0)
    assert sim.end("x", pid, 1, True).error == ErrorCode.PRODUCER_FENCED
    assert sim.end("x", pid + 1, 0, True).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_abort_writes_abort_markers() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.add("x", init.producer_id, 0, T0)
    assert sim.end("x", init.producer_id, 0, False).error == ErrorCode.NONE
    assert [m.commit for m in sim.markers[T0]] == [False]
    assert sim.metadata("x").state is TxnState.COMPLETE_ABORT


# --- EndTxn, transactions v2 (KIP-890 part 2) -----------------------------------------------------


def test_v2_every_end_bumps_the_epoch() -> None:
    sim = TxnSim(transaction_version=2)
    init = _begin(sim)
    pid = init.producer_id
    assert sim.add("x", pid, 0, T0, tv=2) == ErrorCode.NONE
    ended = sim.end("x", pid, 0, True, tv=2)
    assert ended == EndResult(ErrorCode.NONE, pid, 1)
    assert [(m.commit, m.producer_epoch) for m in sim.markers[T0]] == [(True, 1)]
    meta = sim.metadata("x")
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (
        TxnState.COMPLETE_COMMIT, 1, 0,
    )  # fmt: skip
    # the retry of that end (epoch 0) is answered with the new epoch
    assert sim.end("x", pid, 0, True, tv=2) == EndResult(ErrorCode.NONE, pid, 1)
    assert sim.end("x", pid, 0, False, tv=2).error == ErrorCode.INVALID_TXN_STATE
    # the old epoch may not start a new transaction
    assert sim.add("x", pid, 0, T0, tv=2) == ErrorCode.PRODUCER_FENCED
    assert sim.add("x", pid, 1, T0, tv=2) == ErrorCode.NONE
    assert sim.end("x", pid, 1, False, tv=2) == EndResult(ErrorCode.NONE, pid, 2)


def test_v2_abort_with_nothing_added_bumps_the_epoch() -> None:
    sim = TxnSim(transaction_version=2)
    init = _begin(sim)
    pid = init.producer_id
    assert sim.end("x", pid, 0, False, tv=2) == EndResult(ErrorCode.NONE, pid, 1)
    assert sim.metadata("x").state is TxnState.COMPLETE_ABORT
    assert sim.markers == {}
    assert sim.end("x", pid, 1, True, tv=2).error == ErrorCode.INVALID_TXN_STATE
    assert sim.end("x", pid, 5, False, tv=2).error == ErrorCode.PRODUCER_FENCED


def test_v2_epoch_overflow_moves_to_the_next_producer_id() -> None:
    sim = TxnSim(transaction_version=2)
    init = _begin(sim)
    pid = init.producer_id
    meta = sim.metadata("x")
    meta.producer_epoch = SHORT_MAX - 1
    assert sim.add("x", pid, SHORT_MAX - 1, T0, tv=2) == ErrorCode.NONE
    ended = sim.end("x", pid, SHORT_MAX - 1, True, tv=2)
    assert ended.error == ErrorCode.NONE
    assert ended.producer_id != pid
    assert ended.producer_epoch == 0
    assert [m.producer_epoch for m in sim.markers[T0]] == [SHORT_MAX]
    assert (meta.producer_id, meta.producer_epoch, meta.prev_producer_id) == (
        ended.producer_id, 0, pid,
    )  # fmt: skip
    # a retry with the old id and epoch is recognised
    assert sim.end("x", pid, SHORT_MAX - 1, True, tv=2).error == ErrorCode.NONE


def test_v2_init_while_ongoing_bumps_the_epoch_once() -> None:
    sim = TxnSim(transaction_version=2)
    init = _begin(sim)
    sim.add("x", init.producer_id, 0, T0, tv=2)
    assert sim.init("x").error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert [(m.commit, m.producer_epoch) for m in sim.markers[T0]] == [(False, 1)]
    assert sim.init("x").producer_epoch == 2


# --- timeouts, expiration, markers, failures ------------------------------------------------------


def test_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    sim = TxnSim()
    init = sim.init("x", timeout_ms=5_000)
    pid = init.producer_id
    sim.add("x", pid, 0, T0)
    sim.advance(4_000)
    assert sim.machine.abort_timed_out(sim.now) == 0
    sim.advance(2_000)
    assert sim.machine.abort_timed_out(sim.now) == 1
    sim.settle()
    assert sim.metadata("x").state is TxnState.COMPLETE_ABORT
    assert [(m.commit, m.producer_epoch) for m in sim.markers[T0]] == [(False, 1)]
    assert sim.end("x", pid, 0, True).error == ErrorCode.PRODUCER_FENCED
    assert sim.add("x", pid, 0, T0) == ErrorCode.PRODUCER_FENCED


def test_idle_ids_expire() -> None:
    sim = TxnSim()
    _begin(sim)
    sim.advance(50_000)
    assert sim.machine.expire_transactional_ids(sim.now) == 0
    sim.advance(60_000)
    assert sim.machine.expire_transactional_ids(sim.now) == 1
    sim.settle()
    assert sim.machine.state.lookup("x")[2] is None
    assert sim.log[0][-1][1] is None  # a tombstone
    assert sim.machine.describe("x").error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_retriable_marker_errors_are_sent_again() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.add("x", init.producer_id, 0, T0, T1)
    sim.marker_errors[T1] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert sim.end("x", init.producer_id, 0, True).error == ErrorCode.NONE
    assert sim.metadata("x").partitions == {T1}
    sim.advance(100)
    assert sim.metadata("x").state is TxnState.PREPARE_COMMIT
    del sim.marker_errors[T1]
    sim.advance(100)
    assert sim.metadata("x").state is TxnState.COMPLETE_COMMIT
    assert len(sim.markers[T0]) == 1
    assert len(sim.markers[T1]) == 1


def test_failed_write_is_mapped_and_changes_nothing() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.fail = ErrorCode.NOT_ENOUGH_REPLICAS
    assert sim.add("x", init.producer_id, 0, T0) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    sim.fail = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert sim.init("x").error == ErrorCode.NOT_COORDINATOR
    meta = sim.metadata("x")
    assert meta.pending is None
    assert meta.state is TxnState.EMPTY
    assert meta.producer_epoch == 0


def test_completion_write_retried_while_the_coordinator_is_unavailable() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.add("x", init.producer_id, 0, T0)
    sim.hold_markers = True
    sim.end("x", init.producer_id, 0, True)
    sim.fail = ErrorCode.REQUEST_TIMED_OUT
    sim.hold_markers = False
    sim.settle()
    assert sim.metadata("x").pending is TxnState.COMPLETE_COMMIT
    sim.fail = ErrorCode.NONE
    sim.advance(100)
    assert sim.metadata("x").state is TxnState.COMPLETE_COMMIT


def test_fenced_v1_write_failure_does_not_bump_twice() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.add("x", init.producer_id, 0, T0)
    sim.fail = ErrorCode.NOT_ENOUGH_REPLICAS
    assert sim.init("x").error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert sim.metadata("x").failed_epoch_fence
    sim.fail = ErrorCode.NONE
    assert sim.init("x").error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert [m.producer_epoch for m in sim.markers[T0]] == [1]


# --- failover --------------------------------------------------------------------------------------


def test_failover_finishes_a_prepared_commit() -> None:
    sim = TxnSim()
    init = _begin(sim)
    pid = init.producer_id
    sim.add("x", pid, 0, T0, T1)
    sim.hold_markers = True
    assert sim.end("x", pid, 0, True).error == ErrorCode.NONE
    sim.held_markers.clear()  # the coordinator dies before any marker is written
    sim.hold_markers = False
    sim.fail_over()
    meta = sim.metadata("x")
    assert meta.state is TxnState.COMPLETE_COMMIT
    assert [(m.commit, m.coordinator_epoch) for m in sim.markers[T0]] == [(True, 1)]
    assert sim.end("x", pid, 0, True).error == ErrorCode.NONE  # the client's retry


def test_failover_keeps_an_open_transaction_until_it_times_out() -> None:
    sim = TxnSim()
    init = sim.init("x", timeout_ms=5_000)
    sim.add("x", init.producer_id, 0, T0)
    sim.fail_over()
    assert sim.metadata("x").state is TxnState.ONGOING
    assert sim.metadata("x").partitions == {T0}
    sim.advance(6_000)
    sim.machine.abort_timed_out(sim.now)
    sim.settle()
    assert sim.metadata("x").state is TxnState.COMPLETE_ABORT


def test_unload_fails_writes_in_flight_and_answers_not_coordinator() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.hold = True
    assert sim.machine.add_partitions(sim.now, "x", init.producer_id, 0, [T0], 77) is None
    sim.settle()
    assert sim.machine.unload(sim.now, 0) == 1
    sim.settle()
    assert sim.replies[77] == ErrorCode.NOT_COORDINATOR
    sim.hold = False
    sim.complete_writes()  # its late outcome is ignored
    assert sim.init("x").error == ErrorCode.NOT_COORDINATOR
    sim.machine.begin_loading(sim.now, 0, 5)
    assert sim.init("x").error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_stale_load_is_ignored() -> None:
    sim = TxnSim()
    sim.machine.begin_loading(sim.now, 0, 3)
    sim.machine.unload(sim.now, 0)
    assert not sim.machine.load(sim.now, 0, 3, [])


# --- DescribeTransactions, ListTransactions, records ----------------------------------------------


def test_describe_and_list() -> None:
    sim = TxnSim()
    a = sim.init("a")
    sim.init("b")
    sim.add("a", a.producer_id, 0, T1, T0)
    described = sim.machine.describe("a")
    assert (described.error, described.state, described.partitions) == (
        ErrorCode.NONE, "Ongoing", [T0, T1],
    )  # fmt: skip
    assert sim.machine.describe("nope").error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    listed = sim.machine.list_transactions(sim.now, ["Ongoing", "Bogus"], [])
    assert [t.transactional_id for t in listed.transactions] == ["a"]
    assert listed.unknown_state_filters == ["Bogus"]
    by_pid = sim.machine.list_transactions(sim.now, [], [a.producer_id])
    assert [t.transactional_id for t in by_pid.transactions] == ["a"]
    sim.advance(1_000)
    assert [
        t.transactional_id
        for t in sim.machine.list_transactions(sim.now, ["Ongoing"], [], 500).transactions
    ] == ["a"]
    assert sim.machine.list_transactions(sim.now, ["Ongoing"], [], 5_000).transactions == []


def test_record_round_trip_and_versions() -> None:
    sim = TxnSim()
    init = _begin(sim)
    sim.add("x", init.producer_id, 0, T0, ("u", 3))
    meta = sim.metadata("x")
    transit = meta.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 2, -1, sim.now)
    meta.abort_pending()
    for tv, version in ((0, 0), (2, 1)):
        key, value = txn_record("x", transit, tv)
        assert value is not None
        assert value[:2] == version.to_bytes(2, "big")
        parsed = parse_txn_record(key, value)
        assert parsed is not None
        assert parsed.metadata is not None
        assert parsed.metadata.partitions == {T0, ("u", 3)}
        assert parsed.metadata.state is TxnState.PREPARE_COMMIT
        assert parsed.metadata.producer_epoch == transit.producer_epoch


def test_partition_for_is_kafkas_hash() -> None:
    assert partition_for("hello", 50) == 99162322 % 50  # Java: "hello".hashCode() == 99162322
    assert partition_for("Aa", 7) == partition_for("BB", 7) == 2112 % 7  # a known collision
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE
