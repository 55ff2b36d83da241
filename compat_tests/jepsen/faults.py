"""Injecting the nemesis's faults into a running `ClusterProcess` (see nemesis.py for the kinds).

`Injector.inject(fault)` resolves the victims at that moment (partition P's leader from
Metadata, the active controller from DescribeQuorum, otherwise the seeded pick among the
live nodes), starts the fault, holds it, heals it and logs each step with the nodes it hit.
Healing a network fault heals every link; healing a killed or power-cut node starts it again
and waits for its "started" line.

A power cut waits first (up to a minute) until every partition of the topic has its full ISR:
power cuts hit one node's disk at a time, and a node that lost data stays out of the ISRs
until it caught up again, so the next cut must not come before. That is the guarantee the
docs state (eligible leader replicas tolerate min.insync.replicas - 1 nodes losing unsynced
data at once); `power-cut-all` is the deliberate exception.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaException

from compat_tests.cluster.quorum import quorum_state
from compat_tests.confluent_kafka import ck
from compat_tests.jepsen.nemesis import LEADER_KINDS, Fault, Kind, choose
from strom.broker.testing.cluster import CLIENT_LISTENER, ClusterNode, ClusterProcess

Say = Callable[[str], None]
HEALTHY_WAIT_S = 60.0


def leader_of(cluster: ClusterProcess, topic: str, partition: int) -> int | None:
    """Partition `partition`'s leader as Metadata says (None: unknown or no leader)."""
    try:
        md = ck.admin(cluster.bootstrap).list_topics(topic, timeout=5)
    except KafkaException:
        return None
    found = md.topics.get(topic)
    if found is None or found.error is not None or partition not in found.partitions:
        return None
    leader = int(found.partitions[partition].leader)
    return leader if leader >= 0 else None


def full_isrs(cluster: ClusterProcess, topic: str) -> bool:
    """Every partition of `topic` has every replica in its ISR (Metadata's view)."""
    try:
        md = ck.admin(cluster.bootstrap).list_topics(topic, timeout=5)
    except KafkaException:
        return False
    found = md.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return False
    return all(
        len(p.isrs) == len(p.replicas) and p.leader >= 0 for p in found.partitions.values()
    )


class Injector:
    """Injects faults into `cluster` for the queue topic `topic` (see the module docstring)."""

    def __init__(self, cluster: ClusterProcess, topic: str, seed: int, say: Say) -> None:
        self.cluster = cluster
        self.topic = topic
        self.say = say
        self.rng = random.Random(f"{seed}/power")
        """Decides what each power cut keeps (separate from the schedule's own stream)."""

    def alive(self) -> list[int]:
        return [n.node_id for n in self.cluster.nodes if n.alive]

    def _victim(self, kind: Kind, pick: float, partition: int, avoid: set[int]) -> tuple[int, str]:
        candidates = [n for n in self.alive() if n not in avoid] or self.alive()
        if kind in LEADER_KINDS:
            leader = leader_of(self.cluster, self.topic, partition)
            if leader in candidates:
                return leader, f"partition {partition}'s leader"
            return choose(pick, candidates), "(no leader known)"
        if kind == "kill-controller":
            state = quorum_state(self.cluster)
            if state is not None and state.leader_id in candidates:
                return state.leader_id, "the active controller"
            return choose(pick, candidates), "(no active controller found)"
        return choose(pick, candidates), ""

    def inject(self, fault: Fault) -> None:
        if fault.kind in ("power-cut", "power-cut-leader", "power-cut-all"):
            self._wait_healthy()
        heals: list[Callable[[], None]] = []
        try:
            hit: set[int] = set()
            heals.append(self._begin(fault.kind, fault.pick, fault.partition, hit, fault.hold))
            if fault.also is not None:
                heals.append(self._begin(fault.also, fault.also_pick, fault.partition, hit, fault.hold))
            threading.Event().wait(fault.hold)  # how long the fault lasts: the schedule, not a sync
        finally:
            for heal in reversed(heals):
                heal()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + HEALTHY_WAIT_S
        waited = time.monotonic()
        while not full_isrs(self.cluster, self.topic):
            if time.monotonic() > deadline:
                self.say(f"(the ISRs were not all full after {HEALTHY_WAIT_S:.0f}s; cutting anyway)")
                return
            time.sleep(0.2)  # polling the metadata against the deadline
        if time.monotonic() - waited > 1:
            self.say(f"(waited {time.monotonic() - waited:.1f}s for every ISR to be full)")

    def _begin(self, kind: Kind, pick: float, partition: int, hit: set[int], hold: float) -> Callable[[], None]:
        cluster, say = self.cluster, self.say
        if kind in ("kill-all", "power-cut-all"):
            nodes = [n for n in cluster.nodes if n.alive]
            for node in nodes:
                if kind == "kill-all":
                    node.kill9()
                else:
                    say(node.power_cut(self.rng))
            say(f"{kind}: nodes {[n.node_id for n in nodes]} down for {hold:.1f}s")
            return lambda: self._restart(nodes)
        if kind == "bridge":
            a = choose(pick, self.alive())
            b = choose((pick + 0.5) % 1, [n for n in self.alive() if n != a])
            third = [n.node_id for n in cluster.nodes if n.node_id not in (a, b)]
            cluster.partition_halves([a], [b])
            say(f"bridge: nodes {a} and {b} cut off from each other, both reach {third}, "
                f"for {hold:.1f}s")  # fmt: skip
            hit.update((a, b))
            return self._heal_network
        node_id, why = self._victim(kind, pick, partition, hit)
        hit.add(node_id)
        victim = cluster.node(node_id)
        others = [n.node_id for n in cluster.nodes if n.node_id != node_id]
        label = f"node {node_id}{' ' + why if why else ''}"
        if kind in ("isolate", "isolate-leader"):
            cluster.partition(victim)
            say(f"network partition: {label} cut off from {others} for {hold:.1f}s")
            return self._heal_network
        if kind == "isolate-replication":
            cluster.partition_halves([victim], others, listener=CLIENT_LISTENER)
            say(f"replication cut: {label}'s broker links to {others} cut (controller links "
                f"kept) for {hold:.1f}s")  # fmt: skip
            return self._heal_network
        if kind == "one-way-out":
            cluster.cut([victim], others)
            say(f"one-way: {label}'s bytes to {others} dropped for {hold:.1f}s")
            return self._heal_network
        if kind == "one-way-in":
            cluster.cut(others, [victim])
            say(f"one-way: bytes from {others} to {label} dropped for {hold:.1f}s")
            return self._heal_network
        if kind == "pause":
            victim.pause()
            say(f"SIGSTOP {label} for {hold:.1f}s")

            def resume() -> None:
                victim.resume()
                say(f"SIGCONT node {node_id}")

            return resume
        if kind in ("power-cut", "power-cut-leader"):
            say(f"power cut of {label}, down for {hold:.1f}s: {victim.power_cut(self.rng)}")
        else:
            victim.kill9()
            say(f"kill -9 {label}, down for {hold:.1f}s")
        return lambda: self._restart([victim])

    def _heal_network(self) -> None:
        self.cluster.heal()
        self.say("network healed")

    def _restart(self, nodes: list[ClusterNode]) -> None:
        for node in nodes:
            if not node.alive:
                node.start()
        for node in nodes:
            node.wait_started(60)
        self.say(f"node{'s' if len(nodes) > 1 else ''} {[n.node_id for n in nodes]} restarted")
