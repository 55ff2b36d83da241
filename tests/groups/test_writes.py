"""Durability as an input: replies wait for their writes, failed writes answer with Kafka's errors.

The state machine emits `Write`s and acts on them only when `write_completed` reports the
outcome. `Sim` completes writes at once unless `log.hold` is set; these tests hold them to look
at the state in between, and complete them (or fail them) by hand.
"""

from __future__ import annotations

import pytest

from strom.coordinator.groups.api import (
    CommitPartition,
    CommitRequest,
    CommitResult,
    JoinResult,
    OffsetDeleteResult,
)
from strom.coordinator.groups.model import GroupState
from strom.coordinator.groups.records import GroupRecord, OffsetRecord
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim

DAY = 24 * 3600 * 1000


def commit_request(
    offset: int, *, generation: int = -1, member: str = "", partitions: tuple[int, ...] = (0,)
) -> CommitRequest:
    return CommitRequest(
        "g", generation, member, [CommitPartition("t", p, offset, 1, "") for p in partitions]
    )


def commit(sim: Sim, req: CommitRequest) -> int | CommitResult:
    return sim.call(lambda token: sim.machine.commit(sim.now, req, token))


def fetched(sim: Sim) -> dict[tuple[str, int], int]:
    return {
        (topic, p): entry.offset
        for topic, parts in sim.machine.fetch_offsets("g", None)
        for p, entry in parts
        if entry is not None
    }


def test_a_commit_is_not_answered_before_its_write_completes() -> None:
    sim = Sim()
    sim.log.hold = True
    outcome = commit(sim, commit_request(7))
    assert isinstance(outcome, int)  # parked
    assert outcome not in sim.replies
    [write] = sim.held
    assert write.group_id == "g"
    assert len(write.records) == 1
    assert fetched(sim) == {}  # readers see written state only
    assert sim.log.written == []
    sim.complete_writes()
    assert sim.answer(outcome, CommitResult).errors == {("t", 0): ErrorCode.NONE}
    assert fetched(sim) == {("t", 0): 7}
    assert [
        r.entry.offset for r in sim.log.parsed() if isinstance(r, OffsetRecord) and r.entry
    ] == [7]


@pytest.mark.parametrize(
    ("appended", "answered"),
    [
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.INVALID_FETCH_SIZE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.CORRUPT_MESSAGE, ErrorCode.CORRUPT_MESSAGE),  # anything else as it is
    ],
)
def test_a_commit_whose_write_fails_gets_kafkas_coordinator_error(
    appended: ErrorCode, answered: ErrorCode
) -> None:
    sim = Sim()
    (a, b), gen = sim.form(2)
    first = sim.answer(commit(sim, commit_request(5, generation=gen, member=a)), CommitResult)
    assert first.errors == {("t", 0): ErrorCode.NONE}
    written = len(sim.log.written)
    sim.log.hold = True
    outcome = commit(sim, commit_request(9, generation=gen, member=a, partitions=(0, 1)))
    assert isinstance(outcome, int)
    assert outcome not in sim.replies
    sim.complete_writes(appended)
    result = sim.answer(outcome, CommitResult)
    assert result.errors == {("t", 0): answered, ("t", 1): answered}
    assert fetched(sim) == {("t", 0): 5}  # the failed commit changed nothing
    assert len(sim.log.written) == written
    assert sim.state() is GroupState.STABLE
    sim.log.hold = False
    assert sim.heartbeat(b, gen) == ErrorCode.NONE


def test_a_failed_simple_commit_leaves_no_group_behind() -> None:
    sim = Sim()
    sim.log.fail = ErrorCode.KAFKA_STORAGE_ERROR
    result = sim.answer(commit(sim, commit_request(3)), CommitResult)
    assert result.errors == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert "g" not in sim.machine.groups


def test_sync_group_waits_for_the_assignment_write() -> None:
    sim = Sim()
    a, b = sim.join_new(), sim.join_new()
    ta, tb = sim.join(a), sim.join(b)
    gen, leader = sim.joined(ta).generation, sim.joined(tb).leader
    follower = b if leader == a else a
    waiting = sim.sync(follower, gen)
    sim.log.hold = True
    leading = sim.sync(leader, gen, {a: b"pa", b: b"pb"})
    assert sim.reply(waiting) is None
    assert sim.reply(leading) is None
    assert sim.state() is GroupState.COMPLETING_REBALANCE
    assert len(sim.held) == 1
    sim.complete_writes()
    assert sim.synced(leading).assignment == (b"pa" if leader == a else b"pb")
    assert sim.synced(waiting).assignment == (b"pb" if leader == a else b"pa")
    assert sim.state() is GroupState.STABLE


def test_a_rebalance_while_the_assignment_is_written_wins() -> None:
    sim = Sim()
    a = sim.join_new()
    gen = sim.joined(sim.join(a)).generation
    sim.log.hold = True
    leading = sim.sync(a, gen, {a: b"pa"})
    newcomer = sim.join_new()
    sim.join(newcomer)  # PreparingRebalance: the parked SyncGroup is told to rejoin
    assert sim.synced(leading).error == ErrorCode.REBALANCE_IN_PROGRESS
    sim.complete_writes()  # the old generation's assignment arrives late: ignored
    assert sim.state() is GroupState.PREPARING_REBALANCE
    assert sim.group().members[a].assignment == b""


def test_a_static_restart_whose_write_fails_keeps_the_old_member() -> None:
    sim = Sim()
    old = sim.joined(sim.join(instance="i-1")).member_id
    gen = sim.group().generation
    assert sim.synced(sim.sync(old, gen, {old: b"pa"}, instance="i-1")).error == ErrorCode.NONE
    sim.log.fail = ErrorCode.KAFKA_STORAGE_ERROR
    restarted = sim.join(instance="i-1")
    result = sim.joined(restarted)
    assert result.error == ErrorCode.NOT_COORDINATOR
    assert sim.group().static == {"i-1": old}
    assert set(sim.group().members) == {old}
    assert sim.group().leader == old
    sim.log.fail = ErrorCode.NONE
    assert sim.heartbeat(old, gen, instance="i-1") == ErrorCode.NONE
    assert sim.synced(sim.sync(old, gen, instance="i-1")).assignment == b"pa"


def test_a_static_restart_is_answered_once_its_member_id_is_written() -> None:
    sim = Sim()
    old = sim.joined(sim.join(instance="i-1")).member_id
    gen = sim.group().generation
    sim.sync(old, gen, {old: b"pa"}, instance="i-1")
    sim.log.hold = True
    restarted = sim.join(instance="i-1")
    assert isinstance(restarted, int)
    assert sim.reply(restarted) is None
    sim.complete_writes()
    result = sim.joined(restarted)
    assert (result.error, result.generation) == (ErrorCode.NONE, gen)
    [record] = [r for r in sim.log.parsed() if isinstance(r, GroupRecord)][-1:]
    assert record.value is not None
    assert [m.member_id for m in record.value.members] == [result.member_id]


def test_a_group_being_deleted_is_dead_until_written_and_empty_again_if_that_fails() -> None:
    sim = Sim()
    sim.answer(commit(sim, commit_request(4)), CommitResult)
    sim.log.hold = True
    token = sim.token()
    assert sim.machine.delete_group(sim.now, "g", token) is None
    sim.settle()
    assert sim.state() is GroupState.DEAD
    joined = sim.join()
    assert isinstance(joined, JoinResult)
    assert joined.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert sim.answer(commit(sim, commit_request(5)), CommitResult).errors == {
        ("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE
    }
    assert sim.machine.list_groups([], []) == []
    sim.complete_writes(ErrorCode.KAFKA_STORAGE_ERROR)
    assert sim.answer(token, ErrorCode) == ErrorCode.NOT_COORDINATOR
    assert sim.state() is GroupState.EMPTY
    assert fetched(sim) == {("t", 0): 4}
    sim.log.hold = False
    assert sim.delete_groups("g") == {"g": ErrorCode.NONE}
    assert "g" not in sim.machine.groups


def test_deleting_a_group_tombstones_the_commits_still_in_flight() -> None:
    sim = Sim()
    sim.log.hold = True
    committing = commit(sim, commit_request(6))
    token = sim.token()
    assert sim.machine.delete_group(sim.now, "g", token) is None
    sim.settle()
    sim.complete_writes()
    assert sim.answer(committing, CommitResult).errors == {("t", 0): ErrorCode.NONE}
    assert sim.answer(token, ErrorCode) == ErrorCode.NONE
    assert "g" not in sim.machine.groups
    reloaded = Sim()
    reloaded.machine.load(sim.log.parsed(), sim.now)
    assert "g" not in reloaded.machine.groups  # the log agrees with memory


def test_retention_leaves_groups_with_writes_in_flight_alone() -> None:
    sim = Sim(offsets_retention_ms=DAY)
    sim.answer(commit(sim, commit_request(1)), CommitResult)
    sim.now += DAY
    sim.log.hold = True
    recommit = commit(sim, commit_request(2))
    assert sim.expire() == 0  # the group has a commit in flight: next time
    sim.complete_writes()
    assert sim.answer(recommit, CommitResult).errors == {("t", 0): ErrorCode.NONE}
    sim.log.hold = False
    assert sim.expire() == 0  # just committed
    assert fetched(sim) == {("t", 0): 2}


def report_in_reverse(sim: Sim) -> None:
    """Append the held writes in log order, then report their outcomes last first (a driver
    waits for each write's replication in a task of its own, so outcomes can come back in any
    order)."""
    held, sim.held = sim.held, []
    outcomes = [sim.log.append(w.group_id, w.records, w.producer) for w in held]
    for write, outcome in reversed(list(zip(held, outcomes, strict=True))):
        sim.machine.write_completed(sim.now, write.token, outcome)
    sim.settle()


def test_commits_completed_out_of_log_order_keep_the_last_one_written() -> None:
    sim = Sim()
    sim.answer(commit(sim, commit_request(1)), CommitResult)
    sim.log.hold = True
    older, newer = commit(sim, commit_request(1923)), commit(sim, commit_request(1964))
    report_in_reverse(sim)
    assert sim.answer(newer, CommitResult).errors == {("t", 0): ErrorCode.NONE}
    assert sim.answer(older, CommitResult).errors == {("t", 0): ErrorCode.NONE}
    assert fetched(sim) == {("t", 0): 1964}  # as the log has it
    reloaded = Sim()
    reloaded.machine.load(sim.log.parsed(), sim.now)
    assert fetched(reloaded) == {("t", 0): 1964}


def test_a_deletion_completed_before_an_earlier_commit_keeps_the_offset_deleted() -> None:
    sim = Sim()
    sim.answer(commit(sim, commit_request(5)), CommitResult)
    sim.log.hold = True
    committing = commit(sim, commit_request(6))
    deleting = sim.call(lambda token: sim.machine.delete_offsets(sim.now, "g", [("t", 0)], token))
    report_in_reverse(sim)
    assert sim.answer(committing, CommitResult).errors == {("t", 0): ErrorCode.NONE}
    assert sim.answer(deleting, OffsetDeleteResult).error == ErrorCode.NONE
    assert fetched(sim) == {}  # the tombstone follows the commit in the log
    reloaded = Sim()
    reloaded.machine.load(sim.log.parsed(), sim.now)
    assert fetched(reloaded) == {}
