"""The faults of a simulated run: what the nemesis does, drawn from the seed.

| kind | fault | heal |
|---|---|---|
| `kill` | kill -9 of a node (its page cache stays) | start it, after 0-8 s |
| `kill-leader` | kill -9 of the Raft leader (the active controller) | start it |
| `power-cut` | kill -9 and a power cut of its disk: what it had not fsynced is lost, the last write maybe torn | start it |
| `isolate` | a node cut off from the other nodes both ways (clients still reach it) | links back |
| `one-way` | a node's bytes to the others held (or theirs to it) | links back |
| `bridge` | two nodes cut from each other, both reaching the third | links back |
| `pause` | every link of a node stalled both ways (a SIGSTOP as its peers see it) | stall ends |
| `stall` | one link holds its bytes for a while (congestion) | stall ends |
| `resets` | a few connections reset (in-flight requests lost: clients and peers retry) | - |
| `clients-cut` | the clients cut off from one node | links back |
| `slow-link` | one link's latency up to 50 ms with a heavy tail | profile back |
| `clock-jump` | a node's wall clock steps by up to a minute, either way | - |
| `fsync-fails` | every fsync on a node fails (EIO) | stop it, clear, start it |
| `disk-full` | every write that grows a file on a node fails (ENOSPC) | clear; stop it, start it |

Some seeds (`Scenario.for_seed`) open with a scripted sequence aimed at one partition P of the
workload's topic (L its leader, F and G its followers), the situations a random schedule
almost never builds and three fixed bugs needed (`strom.config.planted`); then the random
faults follow. A "replication link" is the brokers' listener (9092) between two nodes; the
controllers' (9093) stays up unless named:

| opening | what it does | the bug it exposes |
|---|---|---|
| `sole-leader-restart` | L's replication links cut until P's ISR is L alone; L killed and restarted at once (before its lease runs out); links healed 3-10 s later | restart-keeps-leader-epoch: with eligible leader replicas off, L's new process leads in its old leader epoch (the live check "one leader per leader epoch") |
| `follower-restart-unfetched` | G's replication link to L cut until G left P's ISR; F's link to L cut too, F's power cut (nothing unsynced kept) and F restarted at once, unable to fetch; 10-15 s later L killed and restarted | isr-trusts-old-incarnation: L puts F back in the ISR on its previous incarnation's log end (the live check "high watermark above an ISR member's log end", then lost records once F leads) |
| `unanswered-isr-change` | (if L is the active controller, its quorum links are cut until another node is) F's replication link to L cut until F left P's ISR; the active controller's bytes to L held (its answers and metadata; L's heartbeats still arrive); F's link healed, F catches up and L's AlterPartition adding it commits unanswered; F's link cut again for 35-45 s (the AlterPartition gives up after 30 s) | isr-forgets-unanswered-proposal: L falls back to the old ISR and moves the high watermark past F, which the controller counts in the ISR |

The power cut of the second opening hits F while every partition's other ISR members hold
what F loses (one unclean shutdown, which `min.insync.replicas=2` survives).

Holds are 1-5 s, or in a third of cases long (8-20 s: past `broker.session.timeout.ms` and
`replica.lag.time.max.ms` of the scenario), so brokers are fenced, ISRs shrink and zombie
leaders come back. A power cut waits until every ISR is full, as every node sees it, and every node's
current process is registered and serving (`Simulation._isrs_full`, the jepsen nemesis's
guard): one node at a time loses unsynced data, what replication with
`min.insync.replicas=2` promises to survive (docs/replication.md#power-cuts); with
`flush.messages=1` whole-cluster power cuts are allowed too. After a power cut, the faults
that may shut a node down uncleanly (kills, disk faults) wait the same way, until the victim
is back in every ISR: until then another unclean shutdown makes the victim the last ISR member
with its shorter log (`_until_rejoined`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import trio

from strom.coordinator.metadata.image import MetadataImage
from tests.simulation.cluster import CLIENT_PORT, CONTROLLER_PORT, SimCluster, SimNode
from tests.simulation.network import LinkProfile

KINDS = (
    "kill",
    "kill-leader",
    "power-cut",
    "isolate",
    "one-way",
    "bridge",
    "pause",
    "stall",
    "resets",
    "clients-cut",
    "slow-link",
    "clock-jump",
    "fsync-fails",
    "disk-full",
)

OPENINGS = ("sole-leader-restart", "follower-restart-unfetched", "unanswered-isr-change")
"""Scripted sequences a seed may open with (see the module docstring)."""

ROLE_WAIT = 40.0
"""How long an opening waits for each state it builds (an ISR shrinking takes
`replica.lag.time.max.ms` and an ISR check); past it, the opening stops there."""


@dataclass(frozen=True)
class FaultPlan:
    weights: dict[str, float]
    every: tuple[float, float] = (1.0, 4.0)
    """Seconds between one fault's heal and the next fault."""
    long_chance: float = 0.33
    whole_cluster_power_cuts: bool = False
    clients: tuple[str, ...] = ()
    opening: str = ""
    """A scripted sequence (OPENINGS) to run before the random faults; empty: none."""


class Nemesis:
    def __init__(
        self,
        cluster: SimCluster,
        plan: FaultPlan,
        rng: random.Random,
        trace: Callable[[str], None],
        isrs_full: Callable[[], bool],
        raft_leader: Callable[[], int | None],
        metadata: Callable[[], MetadataImage | None] = lambda: None,
        topic: str = "",
    ) -> None:
        self.cluster = cluster
        self.plan = plan
        self.rng = rng
        self.trace = trace
        self.isrs_full = isrs_full
        self.raft_leader = raft_leader
        self.metadata = metadata
        """The newest committed metadata (what the openings read ISRs and leaders from)."""
        self.topic = topic
        self.counts: dict[str, int] = {}
        self.recovering = False
        """A power cut's victim may not be back in every ISR yet (see `_until_rejoined`)."""

    def _hold(self) -> float:
        if self.rng.random() < self.plan.long_chance:
            return self.rng.uniform(8.0, 20.0)
        return self.rng.uniform(1.0, 5.0)

    def _node(self) -> SimNode:
        return self.rng.choice(self.cluster.nodes)

    async def run(self, until: float) -> None:
        if self.plan.opening:
            self.counts[self.plan.opening] = 1
            await getattr(self, "_" + self.plan.opening.replace("-", "_"))()
        kinds = sorted(self.plan.weights)
        weights = [self.plan.weights[k] for k in kinds]
        while trio.current_time() < until:
            await trio.sleep(self.rng.uniform(*self.plan.every))
            if trio.current_time() >= until:
                break
            kind = self.rng.choices(kinds, weights)[0]
            self.counts[kind] = self.counts.get(kind, 0) + 1
            await getattr(self, "_" + kind.replace("-", "_"))()

    async def _restart_later(self, node: SimNode, delay: float) -> None:
        await trio.sleep(delay)
        await self.cluster.restart(node)

    # --- processes --------------------------------------------------------------------------

    async def _until_rejoined(self, what: str) -> bool:
        """Whether `what`, a fault that may shut a node down uncleanly, may come now: not while
        a power cut's victim is still out of an ISR (waiting up to 60 s for it to rejoin).
        Until it catches up, an unclean shutdown of another node leaves the victim, with its
        shorter log, the last ISR member (the others leave the ISRs as they restart): more
        unclean shutdowns than `min.insync.replicas=2` survives, by Kafka's rules (seed 515)."""
        if not self.recovering:
            return True
        with trio.move_on_after(60):
            while not self.isrs_full():  # noqa: ASYNC110
                await trio.sleep(0.5)  # polling the brokers' state: nothing signals a change
        if not self.isrs_full():
            self.trace(f"nemesis: no {what} (a power cut's victim not back in every ISR within 60 s)")
            return False
        self.recovering = False
        return True

    async def _kill(self, node: SimNode | None = None) -> None:
        if not await self._until_rejoined("kill"):
            return
        node = node or self._node()
        if not node.up:
            return
        self.cluster.kill(node)
        await self._restart_later(node, self.rng.uniform(0.0, 8.0))

    async def _kill_leader(self) -> None:
        leader = self.raft_leader()
        await self._kill(self.cluster.node(leader) if leader is not None else None)

    async def _power_cut(self) -> None:
        whole = self.plan.whole_cluster_power_cuts and self.rng.random() < 0.3
        with trio.move_on_after(60):
            while not self.isrs_full() or not all(n.up for n in self.cluster.nodes):  # noqa: ASYNC110
                await trio.sleep(0.5)  # polling the brokers' state: nothing signals a change
        if not self.isrs_full():
            self.trace("nemesis: no power cut (ISRs not full within 60 s)")
            return
        keep = self.rng.choice(("random", "random", "none"))
        nodes = list(self.cluster.nodes) if whole else [self._node()]
        for node in nodes:
            self.cluster.power_cut(node, keep)
        self.recovering = True
        delay = self.rng.uniform(0.0, 8.0)
        async with trio.open_nursery() as nursery:
            for node in nodes:
                nursery.start_soon(self._restart_later, node, delay)

    # --- network ------------------------------------------------------------------------------

    def _others(self, node: SimNode) -> set[str]:
        return {n.host for n in self.cluster.nodes if n is not node}

    async def _isolate(self) -> None:
        node, net = self._node(), self.cluster.net
        hold = self._hold()
        self.trace(f"nemesis: {node.host} isolated from the other nodes for {hold:.1f}s")
        net.cut({node.host}, self._others(node))
        net.cut(self._others(node), {node.host})
        await trio.sleep(hold)
        net.heal()
        self.trace("nemesis: network healed")

    async def _one_way(self) -> None:
        node, net = self._node(), self.cluster.net
        hold = self._hold()
        if self.rng.random() < 0.5:
            self.trace(f"nemesis: {node.host}'s bytes to the other nodes held for {hold:.1f}s")
            net.cut({node.host}, self._others(node))
        else:
            self.trace(f"nemesis: the other nodes' bytes to {node.host} held for {hold:.1f}s")
            net.cut(self._others(node), {node.host})
        await trio.sleep(hold)
        net.heal()
        self.trace("nemesis: network healed")

    async def _bridge(self) -> None:
        a, b = self.rng.sample(self.cluster.nodes, 2)
        hold, net = self._hold(), self.cluster.net
        self.trace(f"nemesis: {a.host} and {b.host} cut from each other for {hold:.1f}s")
        net.cut({a.host}, {b.host})
        net.cut({b.host}, {a.host})
        await trio.sleep(hold)
        net.heal()
        self.trace("nemesis: network healed")

    async def _pause(self) -> None:
        node, net = self._node(), self.cluster.net
        hold = self._hold()
        until = trio.current_time() + hold
        self.trace(f"nemesis: {node.host} paused for {hold:.1f}s (every link stalled)")
        hosts = self._others(node) | set(self.plan.clients)
        for other in sorted(hosts):
            net.stall(node.host, other, until)
            net.stall(other, node.host, until)
        await trio.sleep(hold)

    async def _stall(self) -> None:
        a, b = self.rng.sample(self.cluster.nodes, 2)
        hold = self._hold()
        self.trace(f"nemesis: link {a.host}->{b.host} stalled for {hold:.1f}s")
        self.cluster.net.stall(a.host, b.host, trio.current_time() + hold)
        await trio.sleep(min(hold, 2.0))

    async def _resets(self) -> None:
        net = self.cluster.net
        live = net.live_connections()
        if not live:
            return
        chosen = self.rng.sample(live, min(len(live), self.rng.randint(1, 4)))
        self.trace(f"nemesis: connections {chosen} reset")
        for conn_id in sorted(chosen):
            net.reset(conn_id)

    async def _clients_cut(self) -> None:
        if not self.plan.clients:
            return
        node, net = self._node(), self.cluster.net
        hold = self._hold()
        clients = set(self.plan.clients)
        self.trace(f"nemesis: clients cut from {node.host} for {hold:.1f}s")
        net.cut(clients, {node.host})
        net.cut({node.host}, clients)
        await trio.sleep(hold)
        net.heal()
        self.trace("nemesis: network healed")

    async def _slow_link(self) -> None:
        a, b = self.rng.sample(self.cluster.nodes, 2)
        hold, net = self._hold(), self.cluster.net
        self.trace(f"nemesis: link {a.host}->{b.host} slow for {hold:.1f}s")
        net.profiles[(a.host, b.host)] = LinkProfile(base=0.005, jitter=0.045, tail=0.5, tail_chance=0.1)
        await trio.sleep(hold)
        net.profiles.pop((a.host, b.host), None)

    # --- clocks and disks ---------------------------------------------------------------------

    async def _clock_jump(self) -> None:
        node = self._node()
        step = self.rng.randint(-60_000, 60_000)
        node.skew.offset_ms += step
        self.trace(f"nemesis: {node.host}'s wall clock stepped by {step} ms")

    async def _fsync_fails(self) -> None:
        await self._disk_fault("fsync")

    async def _disk_full(self) -> None:
        await self._disk_fault("full")

    async def _disk_fault(self, what: str) -> None:
        if not await self._until_rejoined("disk fault"):  # a failed write may crash the broker
            return
        disk = self.cluster.disk
        node = self._node()
        if disk is None or not node.up:
            return
        hold = self._hold()
        self.trace(f"nemesis: {node.host}'s disk {'fails every fsync' if what == 'fsync' else 'is full'} for {hold:.1f}s")
        faulty = disk.failing_fsync if what == "fsync" else disk.full
        faulty.add(node.root)
        await trio.sleep(hold)
        faulty.discard(node.root)
        self.trace(f"nemesis: {node.host}'s disk repaired; restarting it")
        await self.cluster.stop(node)
        await self.cluster.restart(node)

    # --- openings -----------------------------------------------------------------------------

    def _partition(self, index: int) -> tuple[int, frozenset[int], frozenset[int]] | None:
        """(leader, ISR, replicas) of the workload topic's partition `index`, as the newest
        committed metadata says."""
        image = self.metadata()
        topic = None if image is None else image.topics_by_name.get(self.topic)
        p = None if topic is None else topic.partitions.get(index)
        return None if p is None else (p.leader, frozenset(p.isr), frozenset(p.replicas))

    async def _wait_for(self, what: str, condition: Callable[[], bool], within: float = ROLE_WAIT) -> bool:
        began = trio.current_time()
        with trio.move_on_after(within):
            while not condition():  # noqa: ASYNC110
                await trio.sleep(0.5)  # polling the brokers' state: nothing signals a change
            self.trace(f"nemesis: {what} (after {trio.current_time() - began:.1f}s)")
            return True
        self.trace(f"nemesis: {what}: not within {within:.0f}s; the opening stops here")
        return False

    async def _roles(self, avoid_leader: int | None = None) -> tuple[int, SimNode, SimNode, SimNode] | None:
        """A partition P of the workload's topic with a full ISR and a leader other than
        `avoid_leader`: (P, its leader, two followers in random order)."""
        image = self.metadata()
        topic = None if image is None else image.topics_by_name.get(self.topic)
        indexes = sorted(topic.partitions) if topic is not None else []
        self.rng.shuffle(indexes)
        found: list[int] = []

        def ready() -> bool:
            for index in indexes:
                state = self._partition(index)
                if (
                    state is not None
                    and state[0] >= 0
                    and state[0] != avoid_leader
                    and state[1] == state[2]
                    and all(n.up for n in self.cluster.nodes)
                ):
                    found[:] = [index]
                    return True
            return False

        if not indexes or not await self._wait_for("a partition with a full ISR", ready):
            return None
        index = found[0]
        state = self._partition(index)
        assert state is not None
        followers = [n for n in self.cluster.nodes if n.node_id != state[0]]
        self.rng.shuffle(followers)
        leader = self.cluster.node(state[0])
        self.trace(f"nemesis: opening on {self.topic}-{index}: leader {leader.host}, followers "
                   f"{followers[0].host} and {followers[1].host}")  # fmt: skip
        return index, leader, followers[0], followers[1]

    def _replication(self, a: SimNode, others: list[SimNode], cut: bool) -> None:
        """Cut (or heal) the replication links between `a` and `others`, both ways."""
        net, hosts = self.cluster.net, {n.host for n in others}
        if cut:
            net.cut({a.host}, hosts, port=CLIENT_PORT)
            net.cut(hosts, {a.host}, port=CLIENT_PORT)
        else:
            net.heal({a.host}, hosts, port=CLIENT_PORT)
            net.heal(hosts, {a.host}, port=CLIENT_PORT)
        self.trace(f"nemesis: replication links between {a.host} and {sorted(hosts)} "
                   f"{'cut (controller links kept)' if cut else 'healed'}")  # fmt: skip

    def _isr_is(self, index: int, members: set[int]) -> Callable[[], bool]:
        def check() -> bool:
            state = self._partition(index)
            return state is not None and state[1] == members

        return check

    async def _sole_leader_restart(self) -> None:
        roles = await self._roles()
        if roles is None:
            return
        index, leader, f, g = roles
        self._replication(leader, [f, g], cut=True)
        try:
            if await self._wait_for(
                f"{self.topic}-{index}'s ISR is {leader.host} alone",
                self._isr_is(index, {leader.node_id}),
            ):
                self.cluster.kill(leader)
                await trio.sleep(self.rng.uniform(0.0, 3.0))
                await self.cluster.restart(leader)
                await trio.sleep(self.rng.uniform(3.0, 10.0))
        finally:
            self._replication(leader, [f, g], cut=False)

    async def _follower_restart_unfetched(self) -> None:
        roles = await self._roles()
        if roles is None:
            return
        index, leader, f, g = roles
        self._replication(leader, [g], cut=True)
        try:
            if not await self._wait_for(
                f"{g.host} left {self.topic}-{index}'s ISR",
                self._isr_is(index, {leader.node_id, f.node_id}),
            ):
                return
            self._replication(leader, [f], cut=True)
            self.cluster.power_cut(f, "none")
            self.recovering = True
            await trio.sleep(self.rng.uniform(0.0, 2.0))
            await self.cluster.restart(f)
            await trio.sleep(self.rng.uniform(10.0, 15.0))
            self.cluster.kill(leader)
            await trio.sleep(self.rng.uniform(2.0, 8.0))
            await self.cluster.restart(leader)
        finally:
            self._replication(leader, [f, g], cut=False)

    async def _unanswered_isr_change(self) -> None:
        roles = await self._roles()
        if roles is None:
            return
        index, leader, f, _g = roles
        net = self.cluster.net
        if self.raft_leader() == leader.node_id:  # its AlterPartition would not cross the network
            others = {n.host for n in self.cluster.nodes if n is not leader}
            net.cut({leader.host}, others, port=CONTROLLER_PORT)
            net.cut(others, {leader.host}, port=CONTROLLER_PORT)
            self.trace(f"nemesis: {leader.host}'s quorum links cut, to move the active controller")
            moved = await self._wait_for(
                "another node leads the quorum",
                lambda: self.raft_leader() not in (None, leader.node_id),
                within=20.0,
            )
            net.heal({leader.host}, others, port=CONTROLLER_PORT)
            net.heal(others, {leader.host}, port=CONTROLLER_PORT)
            self.trace(f"nemesis: {leader.host}'s quorum links healed")
            if not moved:
                return
            await trio.sleep(2.0)
        controller = self.raft_leader()
        if controller is None or controller == leader.node_id:
            self.trace("nemesis: no active controller apart from the leader; the opening stops")
            return
        active = self.cluster.node(controller)
        self._replication(leader, [f], cut=True)
        try:
            if not await self._wait_for(
                f"{f.host} left {self.topic}-{index}'s ISR",
                lambda: (s := self._partition(index)) is not None and f.node_id not in s[1],
            ):
                return
            state = self._partition(index)
            if self.raft_leader() != controller or state is None or state[0] != leader.node_id:
                self.trace("nemesis: the active controller or the leader changed; the opening stops")
                return
            net.cut({active.host}, {leader.host}, port=CONTROLLER_PORT)
            self.trace(f"nemesis: the active controller {active.host}'s bytes to {leader.host} "
                       "held (its answers and metadata)")  # fmt: skip
            self._replication(leader, [f], cut=False)
            if await self._wait_for(
                f"the controller counts {f.host} in {self.topic}-{index}'s ISR again",
                lambda: (s := self._partition(index)) is not None and f.node_id in s[1],
                within=20.0,
            ):
                self._replication(leader, [f], cut=True)
                await trio.sleep(self.rng.uniform(35.0, 45.0))
        finally:
            net.heal({active.host}, {leader.host}, port=CONTROLLER_PORT)
            self._replication(leader, [f], cut=False)
            self.trace(f"nemesis: {active.host}'s bytes to {leader.host} flow again")
