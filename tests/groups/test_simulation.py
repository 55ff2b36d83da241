"""Seeded simulations: client-like agents join, die, leave and restart under a fake clock.

Each agent behaves like a consumer (KIP-394 round trip, rejoin on REBALANCE_IN_PROGRESS,
reset on UNKNOWN_MEMBER_ID, heartbeats at a third of the session). After a chaotic phase
the survivors must converge on one Stable generation in which every partition is owned by
exactly one live member, every parked response must have been answered exactly once, and the
group read back from the records written must be the group in memory. With `delayed` writes
the records the coordinator emits stay in flight for a while (and some fail) while requests
keep arriving, as they will once a replicated log reports completion later.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from strom.coordinator.groups.api import JoinResult, SyncResult
from strom.coordinator.groups.model import GroupState
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim

PARTITIONS = 6
SESSION = 6000
REBALANCE = 10_000


@dataclass
class Agent:
    name: str
    static: bool
    member_id: str = ""
    generation: int = -1
    phase: str = "idle"  # idle, joining, syncing, stable, dead
    token: int | None = None
    next_heartbeat: int = 0
    assignment: list[int] = field(default_factory=list)

    @property
    def instance(self) -> str | None:
        return self.name if self.static else None


def _assign(members: list[str]) -> dict[str, bytes]:
    out: dict[str, list[int]] = {m: [] for m in members}
    for p in range(PARTITIONS):
        out[members[p % len(members)]].append(p)
    return {m: bytes(ps) for m, ps in out.items()}


def _step(sim: Sim, agent: Agent) -> None:
    """Advance one agent as a consumer's coordinator client would."""
    if agent.phase == "dead":
        return
    if agent.phase == "idle":
        result = sim.join(
            agent.member_id,
            instance=agent.instance,
            session=SESSION,
            rebalance=REBALANCE,
            client=agent.name,
        )
        _joining(sim, agent, result)
    elif agent.phase == "joining":
        assert agent.token is not None
        reply = sim.reply(agent.token)
        if reply is not None:
            assert isinstance(reply, JoinResult)
            _joined(sim, agent, reply)
    elif agent.phase == "syncing":
        assert agent.token is not None
        reply = sim.reply(agent.token)
        if reply is not None:
            assert isinstance(reply, SyncResult)
            _synced(agent, reply)
    elif agent.phase == "stable" and sim.now >= agent.next_heartbeat:
        error = sim.heartbeat(agent.member_id, agent.generation, instance=agent.instance)
        agent.next_heartbeat = sim.now + SESSION // 3
        _on_error(agent, error)


def _joining(sim: Sim, agent: Agent, result: int | JoinResult) -> None:
    if isinstance(result, int):
        agent.phase, agent.token = "joining", result
    else:
        _joined(sim, agent, result)


def _joined(sim: Sim, agent: Agent, result: JoinResult) -> None:
    if result.error == ErrorCode.MEMBER_ID_REQUIRED:
        agent.member_id, agent.phase = result.member_id, "idle"
        return
    if result.error:
        _on_error(agent, result.error)
        return
    agent.member_id, agent.generation = result.member_id, result.generation
    assignments = _assign([m.member_id for m in result.members]) if result.members else {}
    synced = sim.sync(agent.member_id, agent.generation, assignments, instance=agent.instance)
    if isinstance(synced, int):
        agent.phase, agent.token = "syncing", synced
    else:
        _synced(agent, synced)


def _synced(agent: Agent, result: SyncResult) -> None:
    if result.error:
        _on_error(agent, result.error)
        return
    agent.phase, agent.assignment = "stable", list(result.assignment)
    agent.next_heartbeat = 0


def _on_error(agent: Agent, error: ErrorCode) -> None:
    if error == ErrorCode.NONE:
        return
    if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
        agent.member_id = ""
    agent.phase, agent.token = "idle", None


@pytest.mark.parametrize("delayed", [False, True], ids=["written-at-once", "delayed"])
@pytest.mark.parametrize("seed", range(40))
def test_random_membership_converges(seed: int, delayed: bool) -> None:
    rng = random.Random(seed)
    sim = Sim(initial_rebalance_delay_ms=rng.choice([0, 0, 500, 3000]))
    sim.log.hold = delayed
    agents = [Agent(f"a{i}", static=rng.random() < 0.3) for i in range(rng.randint(1, 6))]
    generations = [0]
    for _ in range(300):
        agent = rng.choice(agents)
        roll = rng.random()
        if roll < 0.03 and agent.phase != "dead":
            agent.phase = "dead"  # killed: no LeaveGroup, no more heartbeats
        elif roll < 0.05 and agent.phase == "stable":
            sim.leave((agent.member_id, agent.instance))
            agent.phase, agent.member_id = "idle", ""
        elif roll < 0.08 and agent.phase == "dead":
            agent.phase, agent.token = "idle", None  # restarted (a static one keeps its name)
            agent.member_id = ""
        else:
            _step(sim, agent)
        if delayed and rng.random() < 0.3:
            sim.complete_writes(ErrorCode.KAFKA_STORAGE_ERROR if rng.random() < 0.1 else None)
        sim.advance(rng.choice([0, 0, 10, 100, 700, 2500]))
        group = sim.machine.groups.get("g")
        if group is not None:
            assert group.generation >= generations[-1]
            generations.append(group.generation)
            if group.state is GroupState.STABLE:
                assert group.leader in group.members
                assert all(
                    m.join_waiter is None and m.sync_waiter is None for m in group.members.values()
                )
    # Calm: the living keep following the protocol until the group settles.
    sim.log.hold = False
    sim.complete_writes()
    live = [a for a in agents if a.phase != "dead"]
    for _ in range(400):
        for agent in live:
            _step(sim, agent)
        sim.advance(250)
        if live and all(a.phase == "stable" for a in live):
            group = sim.machine.groups["g"]
            if (
                group.state is GroupState.STABLE
                and set(group.members) == {a.member_id for a in live}
                and len({a.generation for a in live}) == 1
            ):
                break
    group = sim.machine.groups.get("g")
    if not live:
        return  # everyone died: nothing left to converge
    assert group is not None
    assert group.state is GroupState.STABLE, (seed, group.state)
    assert set(group.members) == {a.member_id for a in live}
    owned = sorted(p for a in live for p in a.assignment)
    assert owned == list(range(PARTITIONS)), (seed, [(a.name, a.assignment) for a in live])
    reloaded = Sim()
    reloaded.machine.load(sim.log.parsed(), sim.now)
    again = reloaded.group()
    assert (again.state, again.generation, again.leader) == (
        group.state,
        group.generation,
        group.leader,
    )
    assert {m: again.members[m].assignment for m in again.members} == {
        m: group.members[m].assignment for m in group.members
    }
