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

Holds are 1-5 s, or in a third of cases long (8-20 s: past `broker.session.timeout.ms` and
`replica.lag.time.max.ms` of the scenario), so brokers are fenced, ISRs shrink and zombie
leaders come back. A power cut waits until every ISR is full (one node at a time loses
unsynced data: what replication with `min.insync.replicas=2` promises to survive,
docs/replication.md#power-cuts); with `flush.messages=1` whole-cluster power cuts are
allowed too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import trio

from tests.simulation.cluster import SimCluster, SimNode
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


@dataclass(frozen=True)
class FaultPlan:
    weights: dict[str, float]
    every: tuple[float, float] = (1.0, 4.0)
    """Seconds between one fault's heal and the next fault."""
    long_chance: float = 0.33
    whole_cluster_power_cuts: bool = False
    clients: tuple[str, ...] = ()


class Nemesis:
    def __init__(
        self,
        cluster: SimCluster,
        plan: FaultPlan,
        rng: random.Random,
        trace: Callable[[str], None],
        isrs_full: Callable[[], bool],
        raft_leader: Callable[[], int | None],
    ) -> None:
        self.cluster = cluster
        self.plan = plan
        self.rng = rng
        self.trace = trace
        self.isrs_full = isrs_full
        self.raft_leader = raft_leader
        self.counts: dict[str, int] = {}

    def _hold(self) -> float:
        if self.rng.random() < self.plan.long_chance:
            return self.rng.uniform(8.0, 20.0)
        return self.rng.uniform(1.0, 5.0)

    def _node(self) -> SimNode:
        return self.rng.choice(self.cluster.nodes)

    async def run(self, until: float) -> None:
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

    async def _kill(self, node: SimNode | None = None) -> None:
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
