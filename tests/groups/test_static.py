"""Static membership (KIP-345) on the pure state machine."""

from __future__ import annotations

from strom.coordinator.groups.api import JoinResult
from strom.coordinator.groups.model import GroupState
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim


def _form_static(
    sim: Sim, instances: list[str], session: int = 10_000, rebalance: int = 30_000
) -> tuple[dict[str, str], int]:
    """Static members skip MEMBER_ID_REQUIRED; returns instance -> member id and the generation."""
    tokens = {
        i: sim.join(instance=i, client=i, session=session, rebalance=rebalance) for i in instances
    }
    sim.advance(10 * sim.config.initial_rebalance_delay_ms)
    results = {i: sim.joined(t) for i, t in tokens.items()}
    gen = max(r.generation for r in results.values())
    if any(r.generation != gen for r in results.values()):
        tokens = {i: sim.join(r.member_id, instance=i) for i, r in results.items()}
        results = {i: sim.joined(t) for i, t in tokens.items()}
        gen = results[instances[0]].generation
    ids = {i: r.member_id for i, r in results.items()}
    leader = sim.group().leader
    assignments = {m: f"part-{i}".encode() for i, m in ids.items()}
    waits = [sim.sync(m, gen, instance=i) for i, m in ids.items() if m != leader]
    sim.sync(leader or "", gen, assignments)
    for w in waits:
        assert sim.synced(w).error == ErrorCode.NONE
    return ids, gen


def test_static_member_joins_without_member_id_required() -> None:
    sim = Sim()
    result = sim.joined(sim.join(instance="i-1"))
    assert result.error == ErrorCode.NONE
    assert result.member_id.startswith("i-1-")
    assert sim.group().static == {"i-1": result.member_id}


def test_restarted_static_follower_gets_its_assignment_back_without_rebalance() -> None:
    sim = Sim(initial_rebalance_delay_ms=100)
    ids, gen = _form_static(sim, ["i-1", "i-2"])
    follower = next(i for i, m in ids.items() if m != sim.group().leader)
    restarted = sim.joined(sim.join(instance=follower, client=follower))  # once written
    assert restarted.error == ErrorCode.NONE
    assert restarted.generation == gen
    assert restarted.member_id != ids[follower]
    assert not restarted.skip_assignment
    assert sim.state() is GroupState.STABLE
    sync = sim.synced(sim.sync(restarted.member_id, gen, instance=follower))
    assert sync.assignment == f"part-{follower}".encode()
    # the old incarnation is fenced
    assert sim.heartbeat(ids[follower], gen, instance=follower) == ErrorCode.FENCED_INSTANCE_ID
    assert sim.heartbeat(restarted.member_id, gen, instance=follower) == ErrorCode.NONE


def test_restarted_static_leader_skips_assignment() -> None:
    sim = Sim(initial_rebalance_delay_ms=100)
    ids, _gen = _form_static(sim, ["i-1", "i-2"])
    leader_instance = next(i for i, m in ids.items() if m == sim.group().leader)
    restarted = sim.joined(sim.join(instance=leader_instance))
    assert restarted.skip_assignment
    assert restarted.leader == restarted.member_id == sim.group().leader
    assert len(restarted.members) == 2
    assert sim.state() is GroupState.STABLE
    old_style = sim.joined(sim.join(instance=leader_instance, v9=False))
    assert old_style.members == []
    assert not old_style.skip_assignment
    assert old_style.leader == restarted.member_id  # the leader as it was (pre KIP-814)
    assert sim.group().leader == old_style.member_id


def test_new_instance_fences_the_old_one_waiting_in_join() -> None:
    sim = Sim(initial_rebalance_delay_ms=100)
    ids, gen = _form_static(sim, ["i-1", "i-2", "i-3"])
    other = sim.join(ids["i-2"], instance="i-2", protocols=[("range", b"v2")])  # rebalance
    old = sim.join(ids["i-1"], instance="i-1")
    assert sim.reply(old) is None  # i-3 has not rejoined yet
    new = sim.join(instance="i-1")
    assert sim.joined(old).error == ErrorCode.FENCED_INSTANCE_ID
    third = sim.join(ids["i-3"], instance="i-3")
    results = [sim.joined(t) for t in (new, other, third)]
    assert {r.generation for r in results} == {gen + 1}
    assert ids["i-1"] not in sim.group().members


def test_static_member_not_rejoining_stays_until_its_session_expires() -> None:
    sim = Sim(initial_rebalance_delay_ms=100)
    ids, gen = _form_static(sim, ["i-1", "i-2"], session=60_000, rebalance=1000)
    t1 = sim.join(
        ids["i-1"], instance="i-1", protocols=[("range", b"v2")], session=60_000, rebalance=1000
    )
    sim.advance(1000)
    result = sim.joined(t1)
    assert result.generation == gen + 1
    assert ids["i-2"] in sim.group().members  # kept: a static member may be restarting
    assert {m.member_id for m in result.members} == set(ids.values())
    sim.advance(60_000)
    assert ids["i-2"] not in sim.group().members


def test_leave_by_instance_id_alone() -> None:
    sim = Sim(initial_rebalance_delay_ms=100)
    ids, _ = _form_static(sim, ["i-1", "i-2"])
    assert sim.leave(("", "i-2")) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert set(sim.group().members) == {ids["i-1"]}
    assert sim.leave(("wrong", "i-1")) == (ErrorCode.NONE, [ErrorCode.FENCED_INSTANCE_ID])
    assert sim.leave(("", "i-9")) == (ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])


def test_known_member_id_with_unknown_instance() -> None:
    sim = Sim(initial_rebalance_delay_ms=100)
    ids, _ = _form_static(sim, ["i-1"])
    result = sim.join(ids["i-1"], instance="i-other")
    assert isinstance(result, JoinResult)
    assert result.error == ErrorCode.UNKNOWN_MEMBER_ID
    fenced = sim.join("i-1-stale", instance="i-1")
    assert isinstance(fenced, JoinResult)
    assert fenced.error == ErrorCode.FENCED_INSTANCE_ID
