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

"Full" is checked where it can be trusted (`cut_blockers`): every broker's current process
must be unfenced (`ClusterNode.serving`), and every broker's own Metadata answer must show
every partition led with all its replicas in the ISR. A broker restarted after a crash (a
kill -9 is one, to the controller) leaves the ISRs only when its new incarnation registers,
which can come seconds after its "started" line (the controller refuses the registration
while it still counts the previous incarnation as alive, e.g. for a lease it renewed on
becoming active). Until then the metadata still names the old incarnation in every ISR,
committed and served by every node: a guard that read one answer of "full" cut the power of
the one replica the controller could still trust (the survivor of two kills), and KIP-966's
last-known-leader election then had to make that replica leader with what its disk kept.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping

import trio
from confluent_kafka import KafkaException

from compat_tests.cluster.quorum import quorum_state
from compat_tests.confluent_kafka import ck
from compat_tests.jepsen.nemesis import (
    COORDINATOR_KINDS,
    LEADER_KINDS,
    PAUSE_KINDS,
    Fault,
    Kind,
    choose,
)
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.cluster import CLIENT_LISTENER, ClusterNode, ClusterProcess
from strom.wire.errors import ProtocolError
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

Say = Callable[[str], None]
HEALTHY_WAIT_S = 60.0
TXN_STATE = "__transaction_state"
"""The coordinator kinds hit the leader of its partition 0: the transactional workload gives
it one partition, so one broker coordinates every transactional id."""


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


PartitionView = tuple[int, frozenset[int], frozenset[int]]
"""One partition as a broker's Metadata answer shows it: (leader, replicas, ISR)."""


def partition_views(node: ClusterNode, topic: str) -> dict[int, PartitionView] | None:
    """`topic`'s partitions as `node` itself answers Metadata (None: no answer, or an error)."""

    async def ask() -> dict[int, PartitionView] | None:
        with trio.move_on_after(3):
            client = await KafkaClient.connect(node.bootstrap, "strom-jepsen-nemesis")
            try:
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=False,
                )
                response = await client.request(request, 12, MetadataResponse)
            finally:
                await client.aclose()
            for found in response.topics:
                if found.name == topic and found.error_code == 0 and found.partitions:
                    return {
                        p.partition_index: (
                            p.leader_id, frozenset(p.replica_nodes), frozenset(p.isr_nodes)
                        )
                        for p in found.partitions
                    }
        return None

    try:
        return trio.run(ask)
    except (OSError, ProtocolError, trio.BrokenResourceError):
        return None


def cut_blockers(
    serving: Mapping[int, bool], views: Mapping[int, Mapping[int, PartitionView] | None]
) -> list[str]:
    """Why a power cut may not come yet (empty: it may), from each broker's `serving` and
    its own Metadata answer (`partition_views`; see the module docstring)."""
    why = [
        f"node {node}'s current process is not unfenced yet (the metadata may still count "
        "its previous incarnation in the ISRs)"
        for node, ok in sorted(serving.items())
        if not ok
    ]
    for node, view in sorted(views.items()):
        if not view:
            why.append(f"node {node} answered no metadata for the topic")
            continue
        for partition, (leader, replicas, isr) in sorted(view.items()):
            if leader < 0 or isr != replicas:
                why.append(
                    f"node {node} sees partition {partition} led by {leader} with ISR "
                    f"{sorted(isr)} of {sorted(replicas)}"
                )
    return why


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
        if kind in COORDINATOR_KINDS:
            coordinator = leader_of(self.cluster, TXN_STATE, 0)
            if coordinator in candidates:
                return coordinator, "the transaction coordinator"
            return choose(pick, candidates), "(no transaction coordinator known)"
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

    def blockers(self) -> list[str]:
        """Why a power cut may not come now (`cut_blockers`; empty: it may)."""
        brokers = self.cluster.brokers
        serving = {n.node_id: n.serving for n in brokers}
        if not all(serving.values()):  # a node not serving yet holds its clients' connections
            return cut_blockers(serving, {})
        return cut_blockers(serving, {n.node_id: partition_views(n, self.topic) for n in brokers})

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + HEALTHY_WAIT_S
        waited = time.monotonic()
        while why := self.blockers():
            if time.monotonic() > deadline:
                self.say(f"(the ISRs were not all full after {HEALTHY_WAIT_S:.0f}s: {why[0]}; "
                         "cutting anyway)")  # fmt: skip
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
        if kind in PAUSE_KINDS:
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
