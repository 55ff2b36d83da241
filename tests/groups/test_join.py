"""JoinGroup on the pure state machine: KIP-394, protocol choice, delays, joins mid-rebalance."""

from __future__ import annotations

import logging

import pytest

from strom.coordinator.groups.api import JoinResult
from strom.coordinator.groups.model import GroupState
from strom.coordinator.groups.records import GroupRecord
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim


def test_new_member_gets_member_id_required_then_joins() -> None:
    sim = Sim()
    first = sim.join(client="app")
    assert isinstance(first, JoinResult)
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    assert sim.group().pending  # remembered until it rejoins or its session passes
    result = sim.joined(sim.join(first.member_id))
    assert result.error == ErrorCode.NONE
    assert (result.generation, result.leader, result.protocol_name) == (1, first.member_id, "range")
    assert [m.member_id for m in result.members] == [first.member_id]
    assert result.protocol_type == "consumer"
    assert sim.state() is GroupState.COMPLETING_REBALANCE
    assert not sim.group().pending


def test_old_versions_join_without_the_round_trip() -> None:
    sim = Sim()
    result = sim.joined(sim.join(v4=False))
    assert result.error == ErrorCode.NONE
    assert result.member_id.startswith("c-")


def test_pending_member_expires_after_its_session() -> None:
    sim = Sim()
    sim.join_new(session=5000)
    sim.advance(4999)
    assert sim.group().pending
    sim.advance(1)
    assert "g" not in sim.machine.groups or not sim.group().pending


def test_unknown_member_of_unknown_group() -> None:
    sim = Sim()
    result = sim.join("nobody")
    assert isinstance(result, JoinResult)
    assert result.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert "g" not in sim.machine.groups


def test_request_checks() -> None:
    sim = Sim(min_session_timeout_ms=6000, max_session_timeout_ms=30_000)
    for kwargs, error in [
        ({"group": ""}, ErrorCode.INVALID_GROUP_ID),
        ({"session": 5999}, ErrorCode.INVALID_SESSION_TIMEOUT),
        ({"session": 30_001}, ErrorCode.INVALID_SESSION_TIMEOUT),
        ({"protocol_type": ""}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ]:
        result = sim.join(**kwargs)  # type: ignore[arg-type]
        assert isinstance(result, JoinResult)
        assert result.error == error, kwargs
    assert sim.machine.groups == {}


def test_protocol_selection_by_vote() -> None:
    sim = Sim(initial_rebalance_delay_ms=100)
    prefs = [
        [("sticky", b"s1"), ("range", b"r1")],
        [("range", b"r2"), ("sticky", b"s2")],
        [("range", b"r3"), ("roundrobin", b"x"), ("sticky", b"s3")],
    ]
    ids = [sim.join_new(client=f"c{i}", protocols=p) for i, p in enumerate(prefs)]
    tokens = [sim.join(m, protocols=p) for m, p in zip(ids, prefs, strict=True)]
    sim.advance(1000)
    results = [sim.joined(t) for t in tokens]
    assert {r.protocol_name for r in results} == {"range"}
    leader = next(r for r in results if r.members)
    assert {m.member_id: m.metadata for m in leader.members} == dict(
        zip(ids, [b"r1", b"r2", b"r3"], strict=True)
    )
    assert sum(1 for r in results if r.members) == 1


def test_inconsistent_protocols_are_refused() -> None:
    sim = Sim()
    sim.form(1)
    other_type = sim.join(protocol_type="connect")
    assert isinstance(other_type, JoinResult)
    assert other_type.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    no_common = sim.join(protocols=[("roundrobin", b"")])
    assert isinstance(no_common, JoinResult)
    assert no_common.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_any_protocol_type_works() -> None:
    sim = Sim()
    member = sim.join_new(protocol_type="connect", protocols=[("sessioned", b"w")])
    result = sim.joined(sim.join(member, protocol_type="connect", protocols=[("sessioned", b"w")]))
    assert result.error == ErrorCode.NONE
    assert result.protocol_type == "connect"
    assert sim.group().subscribed_topics is None


def test_initial_delay_waits_and_extends_for_new_members() -> None:
    sim = Sim(initial_rebalance_delay_ms=3000)
    a = sim.join(sim.join_new(client="a"), rebalance=10_000)
    sim.advance(2000)
    b = sim.join(sim.join_new(client="b"), rebalance=10_000)
    sim.advance(1000)  # the first delay ends, but a member arrived: wait another delay
    assert sim.reply(a) is None
    sim.advance(2999)
    assert sim.reply(a) is None
    sim.advance(1)
    assert sim.joined(a).generation == sim.joined(b).generation == 1
    assert len(sim.group().members) == 2


def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    sim = Sim(initial_rebalance_delay_ms=3000)
    a = sim.join(sim.join_new(client="a"), rebalance=5000)
    for i in range(4):
        sim.advance(1500)
        sim.join(sim.join_new(client=f"n{i}"), rebalance=5000)
    assert sim.joined(a).error == ErrorCode.NONE
    assert sim.now - 1_000_000 <= 6000


def test_zero_initial_delay_completes_at_once() -> None:
    sim = Sim(initial_rebalance_delay_ms=0)
    result = sim.joined(sim.join(sim.join_new()))
    assert result.generation == 1


def test_member_joining_during_a_rebalance_is_included() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2)
    assert sim.heartbeat(a, gen) == ErrorCode.NONE
    ta = sim.join(a)  # the leader rejoins: a rebalance starts
    assert sim.state() is GroupState.PREPARING_REBALANCE
    assert sim.heartbeat(b, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    c = sim.join_new(client="late")
    tc = sim.join(c)
    assert sim.reply(ta) is None
    assert sim.reply(tc) is None
    tb = sim.join(b)
    results = [sim.joined(t) for t in (ta, tb, tc)]
    assert {r.generation for r in results} == {gen + 1}
    assert len(next(r for r in results if r.members).members) == 3


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    sim = Sim()
    (a, b, c), gen = sim.form(3, session=60_000)
    ta = sim.join(a, rebalance=30_000)
    tb = sim.join(b, rebalance=30_000)
    sim.advance(29_999)
    assert sim.reply(ta) is None
    sim.advance(1)
    result = sim.joined(ta)
    assert result.generation == gen + 1
    assert set(sim.group().members) == {a, b}
    assert sim.joined(tb).error == ErrorCode.NONE
    assert sim.heartbeat(c, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_leader_leaving_mid_rebalance_hands_leadership_over() -> None:
    sim = Sim()
    (a, b, c), gen = sim.form(3)
    assert sim.group().leader == a
    tb = sim.join(b, protocols=[("range", b"new")])
    tc = sim.join(c)
    assert sim.leave((a, None)) == (ErrorCode.NONE, [ErrorCode.NONE])
    rb, rc = sim.joined(tb), sim.joined(tc)
    assert rb.generation == rc.generation == gen + 1
    assert rb.leader == rc.leader == b
    assert [m.member_id for m in rb.members] == [b, c]
    assert rc.members == []


def test_leader_leaving_while_completing_rebalance() -> None:
    sim = Sim()
    (a, b), _gen = sim.form(2)
    ta, tb = sim.join(a), sim.join(b)
    gen2 = sim.joined(ta).generation
    wait_b = sim.sync(b, gen2)
    assert sim.reply(wait_b) is None
    sim.leave((a, None))
    assert sim.synced(wait_b).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert sim.state() is GroupState.PREPARING_REBALANCE
    rb = sim.joined(sim.join(b))
    assert (rb.leader, rb.generation) == (b, gen2 + 1)
    assert sim.joined(tb).generation == gen2


def test_rejoin_with_same_metadata_in_stable_returns_the_generation() -> None:
    sim = Sim()
    (_a, b), gen = sim.form(2)
    result = sim.join(b)
    assert isinstance(result, JoinResult)
    assert (result.error, result.generation, result.members) == (ErrorCode.NONE, gen, [])
    assert sim.state() is GroupState.STABLE


def test_rejoin_with_new_metadata_rebalances() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2)
    tb = sim.join(b, protocols=[("range", b"changed")])
    assert sim.state() is GroupState.PREPARING_REBALANCE
    ta = sim.join(a)
    leader = sim.joined(ta)
    assert sim.joined(tb).generation == gen + 1
    assert {m.member_id: m.metadata for m in leader.members}[b] == b"changed"


def test_duplicate_join_while_completing_returns_same_generation() -> None:
    sim = Sim()
    (a, b), _gen = sim.form(2)
    ta, tb = sim.join(a), sim.join(b)
    gen2 = sim.joined(ta).generation
    again = sim.join(b)
    assert isinstance(again, JoinResult)
    assert again.generation == gen2 == sim.joined(tb).generation


def test_group_max_size() -> None:
    sim = Sim(max_size=2)
    sim.form(2)
    result = sim.join(client="third")
    assert isinstance(result, JoinResult)
    assert result.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert len(sim.group().members) == 2


def test_last_member_leaving_empties_the_group_and_stores_it() -> None:
    sim = Sim()
    (a,), gen = sim.form(1)
    sim.log.written.clear()
    sim.log.producers.clear()
    sim.leave((a, None))
    sim.advance(0)
    assert sim.state() is GroupState.EMPTY
    assert sim.group().generation == gen + 1
    [record] = sim.log.parsed()
    assert isinstance(record, GroupRecord)
    assert record.value is not None
    assert record.value.members == []


def test_only_member_rejoining_completes_at_once() -> None:
    """A lone leader rejoining a Stable group (new metadata) must not wait for anyone."""
    sim = Sim()
    (a,), gen = sim.form(1)
    result = sim.joined(sim.join(a, protocols=[("range", b"v2")]))
    assert result.generation == gen + 1
    assert sim.state() is GroupState.COMPLETING_REBALANCE


def test_zero_delay_first_generation_waits_for_members_mid_handshake() -> None:
    """Three members arriving together form one generation, not three (no heartbeat wait)."""
    sim = Sim(initial_rebalance_delay_ms=0)
    ids = [sim.join_new(client=f"c{i}") for i in range(3)]
    first = sim.join(ids[0])
    assert sim.reply(first) is None  # two members are one round trip away
    second = sim.join(ids[1])
    third = sim.join(ids[2])
    results = [sim.joined(t) for t in (first, second, third)]
    assert {r.generation for r in results} == {1}
    assert len(next(r for r in results if r.members).members) == 3


def test_zero_delay_does_not_wait_forever_for_a_vanished_handshake() -> None:
    sim = Sim(initial_rebalance_delay_ms=0)
    ids = [sim.join_new(client=f"c{i}", session=5000) for i in range(2)]
    first = sim.join(ids[0], session=5000)
    sim.advance(4999)
    assert sim.reply(first) is None
    sim.advance(1)  # the other never came back: its pending id expires
    assert sim.joined(first).generation == 1
    assert list(sim.group().members) == [ids[0]]


def test_state_transitions_are_logged_with_generation_and_members(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A rebalance loop must be readable from the broker's log (as Kafka logs them)."""
    sim = Sim()
    with caplog.at_level(logging.INFO, logger="strom.groups"):
        sim.joined(sim.join(sim.join_new()))
    group_id = sim.group().group_id
    assert f"group {group_id}: Empty -> PreparingRebalance (generation 0, 1 members)" in caplog.text
    assert (
        f"group {group_id}: PreparingRebalance -> CompletingRebalance (generation 1, 1 members)"
        in caplog.text
    )
