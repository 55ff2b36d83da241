"""SyncGroup, Heartbeat, LeaveGroup and session expiry on the pure state machine."""

from __future__ import annotations

from strom.coordinator.groups.api import SyncResult
from strom.coordinator.groups.model import GroupState
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim


def test_followers_wait_for_the_leaders_assignment() -> None:
    sim = Sim(initial_rebalance_delay_ms=50)
    a, b = sim.join_new(client="a"), sim.join_new(client="b")
    ta, tb = sim.join(a), sim.join(b)
    sim.advance(1000)
    gen = sim.joined(ta).generation
    wait = sim.sync(b, gen)
    assert sim.reply(wait) is None
    assert sim.heartbeat(b, gen) == ErrorCode.NONE  # CompletingRebalance: heartbeats are fine
    mine = sim.synced(sim.sync(a, gen, {a: b"A", b: b"B"}))
    assert mine.assignment == b"A"
    assert (mine.protocol_type, mine.protocol_name) == ("consumer", "range")
    assert sim.synced(wait).assignment == b"B"
    assert sim.state() is GroupState.STABLE
    assert sim.joined(tb).generation == gen
    [stored] = [r for r in sim.log.parsed() if r.value is not None]  # type: ignore[union-attr]
    assert {m.member_id: m.assignment for m in stored.value.members} == {a: b"A", b: b"B"}  # type: ignore[union-attr]


def test_sync_in_stable_returns_the_current_assignment() -> None:
    sim = Sim()
    (_a, b), gen = sim.form(2)
    assert sim.synced(sim.sync(b, gen)).assignment == f"a-{b}".encode()


def test_sync_errors() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2)
    cases = [
        (sim.sync("ghost", gen), ErrorCode.UNKNOWN_MEMBER_ID),
        (sim.sync(b, gen + 7), ErrorCode.ILLEGAL_GENERATION),
        (sim.sync(b, gen, group="nope"), ErrorCode.UNKNOWN_MEMBER_ID),
    ]
    for result, error in cases:
        assert isinstance(result, SyncResult)
        assert result.error == error
    sim.join(a)  # rebalance
    result = sim.sync(b, gen)
    assert isinstance(result, SyncResult)
    assert result.error == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_checks_protocol_type_and_name() -> None:
    sim = Sim()
    (a,), gen = sim.form(1)
    token = 999_999
    from strom.coordinator.groups.api import SyncRequest

    bad_type = sim.machine.sync(sim.now, SyncRequest("g", a, gen, {}, None, "connect", None), token)
    bad_name = sim.machine.sync(
        sim.now, SyncRequest("g", a, gen, {}, None, "consumer", "rr"), token
    )
    good = sim.machine.sync(sim.now, SyncRequest("g", a, gen, {}, None, "consumer", "range"), token)
    assert bad_type is not None
    assert bad_type.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert bad_name is not None
    assert bad_name.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert good is not None
    assert good.error == ErrorCode.NONE


def test_storage_failure_during_sync_restarts_the_rebalance() -> None:
    sim = Sim()
    a = sim.join_new()
    gen = sim.joined(sim.join(a)).generation
    sim.log.fail = ErrorCode.KAFKA_STORAGE_ERROR
    result = sim.synced(sim.sync(a, gen, {a: b"x"}))
    assert result.error == ErrorCode.NOT_COORDINATOR
    assert sim.state() is GroupState.PREPARING_REBALANCE


def test_heartbeat_errors_and_rebalance_signal() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2)
    assert sim.heartbeat(a, gen) == ErrorCode.NONE
    assert sim.heartbeat(a, gen - 1) == ErrorCode.ILLEGAL_GENERATION
    assert sim.heartbeat("ghost", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.heartbeat(a, gen, group="other") == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.heartbeat(a, gen, group="") == ErrorCode.INVALID_GROUP_ID
    sim.join(b, protocols=[("range", b"v2")])
    assert sim.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2, session=6000)
    sim.advance(3000)
    assert sim.heartbeat(a, gen) == ErrorCode.NONE
    sim.advance(2999)
    assert b in sim.group().members
    sim.advance(1)  # b never heartbeat: gone after its 6 s session
    assert b not in sim.group().members
    assert sim.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    result = sim.joined(sim.join(a, session=6000))
    assert result.generation == gen + 1
    assert [m.member_id for m in result.members] == [a]


def test_session_is_measured_from_the_last_heartbeat() -> None:
    sim = Sim()
    (a,), gen = sim.form(1, session=6000)
    sim.advance(5999)
    assert sim.heartbeat(a, gen) == ErrorCode.NONE
    sim.advance(5999)
    assert sim.state() is GroupState.STABLE
    sim.advance(1)
    assert sim.state() is GroupState.EMPTY


def test_members_waiting_in_join_do_not_expire_by_session() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2, session=6000)
    ta = sim.join(a, session=6000, rebalance=20_000)
    sim.advance(5000)
    assert sim.heartbeat(b, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    sim.advance(5000)  # a has waited 10 s (> session) for b: still there
    assert a in sim.group().members
    tb = sim.join(b, session=6000, rebalance=20_000)
    assert sim.joined(ta).generation == sim.joined(tb).generation == gen + 1


def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    sim = Sim()
    (a, b), _gen = sim.form(2, session=60_000)
    ta = sim.join(a, session=60_000, rebalance=10_000, protocols=[("range", b"v2")])
    tb = sim.join(b, session=60_000, rebalance=10_000)
    gen2 = sim.joined(ta).generation
    assert sim.joined(tb).generation == gen2
    assert sim.group().leader == a
    assert sim.synced(sim.sync(a, gen2, {a: b"A", b: b"B"})).error == ErrorCode.NONE
    assert sim.state() is GroupState.STABLE
    sim.advance(9_999)
    assert b in sim.group().members
    sim.advance(1)
    assert set(sim.group().members) == {a}
    assert sim.state() is GroupState.PREPARING_REBALANCE


def test_leave_by_member_id_and_unknown_members() -> None:
    sim = Sim()
    (a, b), _gen = sim.form(2)
    assert sim.leave((b, None), ("ghost", None)) == (
        ErrorCode.NONE,
        [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID],
    )
    assert set(sim.group().members) == {a}
    assert sim.state() is GroupState.PREPARING_REBALANCE
    assert sim.leave((a, None), group="nope") == (ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])


def test_leave_of_a_pending_member() -> None:
    sim = Sim()
    pending = sim.join_new()
    assert sim.leave((pending, None)) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert not sim.group().pending


def test_leave_while_waiting_in_join_answers_the_parked_join() -> None:
    sim = Sim()
    (a, _b), _gen = sim.form(2)
    ta = sim.join(a)
    sim.leave((a, None))
    assert sim.joined(ta).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_generation_fencing_of_a_zombie() -> None:
    """A member dropped by a rebalance cannot heartbeat, sync or commit with its old generation."""
    sim = Sim()
    (a, b), gen = sim.form(2, session=6000)
    sim.advance(3000)
    sim.heartbeat(a, gen)
    sim.advance(3000)  # b expired
    ta = sim.join(a, session=6000)
    gen2 = sim.joined(ta).generation
    assert gen2 == gen + 1
    assert sim.heartbeat(b, gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.heartbeat(a, gen) == ErrorCode.ILLEGAL_GENERATION
    result = sim.sync(b, gen)
    assert isinstance(result, SyncResult)
    assert result.error == ErrorCode.UNKNOWN_MEMBER_ID
