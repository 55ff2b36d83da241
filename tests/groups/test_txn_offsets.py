"""Transactional offsets (TxnOffsetCommit) in the group state machine: pending until their
transaction's marker, Kafka's member and generation checks, reload from the log."""

from __future__ import annotations

from strom.coordinator.groups.api import (
    CommitPartition,
    CommitRequest,
    CommitResult,
    TxnCommitRequest,
)
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim

PID, EPOCH = 4000, 0


def _txn_commit(
    sim: Sim,
    offset: int,
    *,
    group: str = "g",
    pid: int = PID,
    generation: int = -1,
    member: str = "",
    topic: str = "t",
    partition: int = 0,
) -> CommitResult:
    req = TxnCommitRequest(
        group, pid, EPOCH, [CommitPartition(topic, partition, offset, 3, "m")], generation, member
    )
    outcome = sim.call(lambda token: sim.machine.txn_commit(sim.now, req, token))
    return sim.answer(outcome, CommitResult)


def _committed(sim: Sim, group: str = "g") -> dict[tuple[str, int], int]:
    return {
        (topic, p): e.offset
        for topic, parts in sim.machine.fetch_offsets(group, None)
        for p, e in parts
        if e is not None
    }


def _marker(sim: Sim, commit: bool, pid: int = PID) -> int:
    sim.log.mark(pid, commit)
    return sim.machine.complete_transaction(pid, commit, lambda _group: True)


def test_pending_until_commit_marker() -> None:
    sim = Sim()
    assert _txn_commit(sim, 10).errors == {("t", 0): ErrorCode.NONE}
    assert _committed(sim) == {}
    assert sim.machine.unstable_offsets("g") == {("t", 0)}
    assert _marker(sim, True) == 1
    assert _committed(sim) == {("t", 0): 10}
    assert sim.machine.unstable_offsets("g") == set()


def test_abort_marker_drops_them() -> None:
    sim = Sim()
    _txn_commit(sim, 10)
    assert _marker(sim, False) == 0
    assert _committed(sim) == {}
    assert sim.machine.unstable_offsets("g") == set()


def test_markers_of_other_producers_or_partitions_do_not_touch_them() -> None:
    sim = Sim()
    _txn_commit(sim, 10)
    assert sim.machine.complete_transaction(PID + 1, True, lambda _g: True) == 0
    assert sim.machine.complete_transaction(PID, True, lambda g: g != "g") == 0
    assert sim.machine.unstable_offsets("g") == {("t", 0)}


def test_a_later_plain_commit_wins_over_an_earlier_transaction() -> None:
    sim = Sim()
    _txn_commit(sim, 10)
    req = CommitRequest("g", -1, "", [CommitPartition("t", 0, 20, -1, "")])
    assert sim.answer(
        sim.call(lambda token: sim.machine.commit(sim.now, req, token)), CommitResult
    ).errors == {("t", 0): ErrorCode.NONE}
    _marker(sim, True)
    assert _committed(sim) == {("t", 0): 20}


def test_generation_and_member_checks() -> None:
    sim = Sim()
    (a, _), gen = sim.form(2)
    assert _txn_commit(sim, 1, generation=gen, member=a).errors == {("t", 0): ErrorCode.NONE}
    assert _txn_commit(sim, 1, generation=gen + 1, member=a).errors == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert _txn_commit(sim, 1, generation=gen, member="ghost").errors == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID
    }
    # without member or generation, an active group still takes it (Kafka's transactional rule)
    assert _txn_commit(sim, 1).errors == {("t", 0): ErrorCode.NONE}
    # a missing group with a generation: ILLEGAL_GENERATION; without one it is created
    assert _txn_commit(sim, 1, group="other", generation=3, member="m").errors == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert _txn_commit(sim, 1, group="simple").errors == {("t", 0): ErrorCode.NONE}
    assert "simple" in sim.machine.groups


def test_a_failed_write_keeps_nothing_pending() -> None:
    sim = Sim()
    sim.log.fail = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _txn_commit(sim, 1, group="x").errors == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert sim.machine.unstable_offsets("x") == set()
    assert "x" not in sim.machine.groups


def test_reload_keeps_pending_and_applies_markers_in_log_order() -> None:
    sim = Sim()
    _txn_commit(sim, 10, pid=1)
    _txn_commit(sim, 11, pid=2, partition=1)
    _txn_commit(sim, 12, pid=3, partition=2)
    _marker(sim, True, pid=1)
    _marker(sim, False, pid=2)
    again = Sim()
    again.machine.load(sim.log.parsed(), again.now)
    assert _committed(again) == {("t", 0): 10}
    assert again.machine.unstable_offsets("g") == {("t", 2)}
    again.machine.complete_transaction(3, True, lambda _g: True)
    assert _committed(again) == {("t", 0): 10, ("t", 2): 12}


def test_retention_leaves_a_group_with_pending_offsets() -> None:
    sim = Sim(offsets_retention_ms=1000)
    _txn_commit(sim, 10)
    sim.advance(5000)
    assert sim.expire() == 0
    assert "g" in sim.machine.groups
    _marker(sim, True)
    sim.advance(5000)
    assert sim.expire() == 1
