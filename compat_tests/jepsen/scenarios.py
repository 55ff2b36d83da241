"""Scripted nemeses: fault sequences that make one known bug lose or fork data, end to end.

A random schedule finds what nobody thought of; a scenario proves the checker sees what
somebody did. Each scenario below drives the queue workload's cluster (`workload.run` with a
`nemesis`) into the state a bug needs, and says which violation the checker must report when
the bug is planted (`strom.config.planted`, `ClusterProcess(planted=...)`) or when the
configuration does not protect against the fault (eligible leader replicas off). Run one:

    python -m compat_tests.jepsen --scenario last-replica-standing --elr 0
    python -m compat_tests.jepsen --scenario restarted-follower --plant isr-trusts-old-incarnation

| scenario | what it does (P: partition 0, L: its leader, F and G: its followers) | caught as |
|---|---|---|
| last-replica-standing | KIP-966's case: P's followers lose their replication links until the ISR is L alone, L loses its unsynced data in a power cut, the links heal and L restarts | lost, with eligible leader replicas off (L leads again with the shorter log); valid with them on (a follower in the ELR leads) |
| unanswered-expansion | split roles (3 controllers, 3 brokers), `broker.session.timeout.ms=40000` (longer than the 30 s a leader retries an AlterPartition). F falls out of P's ISR; the controllers' bytes to L are dropped; F catches up and L's AlterPartition adding it commits unanswered; F stops fetching again; L gives up on the AlterPartition after 30 s and L and G take writes; L and G are killed, and F leads once their leases ran out | lost with isr-forgets-unanswered-proposal planted (the high watermark passed F) |
| restarted-follower | G falls out of P's ISR; F's power is cut and F restarts unable to fetch; L is killed | lost with isr-trusts-old-incarnation planted (F was put back in the ISR on its previous incarnation's log end, and leads) |
| restart-same-epoch | eligible leader replicas off, min.insync.replicas=1: P's followers lose their replication links until the ISR is L alone, L's power is cut and it restarts at once, takes new writes past what the followers hold, then the links heal | replica divergence with restart-keeps-leader-epoch planted (L appended in the epoch the followers hold; without it they truncate to L: the records only L held are lost, by configuration, not forked) |
| last-clean-replica | F and G are killed -9 and restart with their replication links to L cut: their new incarnations register (an unclean shutdown each: they leave every ISR and stay out of the ELR) and cannot catch up, so P's ISR is L alone with an empty ELR; L's power is cut, keeping nothing unsynced; the links heal and L restarts | lost with either eligible-leader-replicas setting, by Kafka's rules (three unclean shutdowns, no replica caught up in between: the last known leader L leads with what its disk kept). Before F and G register, one Metadata answer still says the ISR is full: the queue test's main-branch failure, when the nemesis's guard believed it |
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from compat_tests.confluent_kafka import ck
from compat_tests.jepsen.faults import Injector, Say, leader_of
from strom.broker.testing.cluster import CLIENT_LISTENER, ClusterNode, ClusterProcess

TOPIC = "jepsen-queue"
PARTITION = 0


@dataclass(frozen=True)
class Scenario:
    name: str
    nemesis: Callable[[Injector, Say], None]
    split: bool = False
    """3 controllers and 3 brokers instead of 3 combined nodes."""
    overrides: dict[str, str] = field(default_factory=dict)
    """Broker configs on top of the queue cluster's (`workload.TIMEOUTS`)."""
    message_timeout_ms: int = 120_000
    """The producers' message.timeout.ms (`workload.Options`); a scenario that stalls a
    partition for longer raises it."""
    topic_config: dict[str, str] = field(default_factory=dict)
    plant: str = ""
    """The bug this scenario catches (empty: it is about a configuration)."""
    caught_as: str = "lost"
    """The violation the checker reports when the bug is planted."""


def _isr(cluster: ClusterProcess, partition: int = PARTITION) -> set[int] | None:
    try:
        md = ck.admin(cluster.bootstrap).list_topics(TOPIC, timeout=5)
    except KafkaException:
        return None
    found = md.topics.get(TOPIC)
    if found is None or found.error is not None or partition not in found.partitions:
        return None
    return {int(b) for b in found.partitions[partition].isrs}


def _wait_for(what: str, condition: Callable[[], bool], say: Say, timeout: float = 60.0) -> None:
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"scenario: {what} did not happen within {timeout:.0f}s")
        time.sleep(0.2)  # polling the cluster against the deadline
    say(f"({what} after {time.monotonic() - began:.1f}s)")


def _pause(seconds: float) -> None:
    threading.Event().wait(seconds)  # the scenario's own timing, not a synchronisation


def _roles(cluster: ClusterProcess, say: Say) -> tuple[ClusterNode, ClusterNode, ClusterNode]:
    """P's leader and its two followers."""
    _wait_for(f"partition {PARTITION} has a full ISR",
              lambda: len(_isr(cluster) or ()) == 3, say)  # fmt: skip
    leader = leader_of(cluster, TOPIC, PARTITION)
    assert leader is not None
    first, second = sorted(n.node_id for n in cluster.brokers if n.node_id != leader)
    say(f"partition {PARTITION}: leader {leader}, followers {first} and {second}")
    return cluster.node(leader), cluster.node(first), cluster.node(second)


def _restart(say: Say, *nodes: ClusterNode) -> None:
    for node in nodes:
        if not node.alive:
            node.start()
    for node in nodes:
        node.wait_started(60)
    say(f"restarted {[n.node_id for n in nodes]}")


def last_replica_standing(injector: Injector, say: Say) -> None:
    cluster = injector.cluster
    leader, f, g = _roles(cluster, say)
    cluster.partition_halves([leader], [f, g], listener=CLIENT_LISTENER)
    say(f"replication links between {leader.node_id} and {[f.node_id, g.node_id]} cut")
    _wait_for(f"partition {PARTITION}'s ISR is the leader alone",
              lambda: _isr(cluster) == {leader.node_id}, say)  # fmt: skip
    say(leader.power_cut(random.Random(1), keep="none"))
    cluster.heal()
    say("network healed")
    _restart(say, leader)
    _pause(8)


def unanswered_expansion(injector: Injector, say: Say) -> None:
    cluster = injector.cluster
    leader, f, g = _roles(cluster, say)
    cluster.partition_halves([f], [leader], listener=CLIENT_LISTENER)
    say(f"replication link between {f.node_id} and {leader.node_id} cut")
    _wait_for(f"{f.node_id} left partition {PARTITION}'s ISR",
              lambda: _isr(cluster) == {leader.node_id, g.node_id}, say)  # fmt: skip
    controllers = [n.node_id for n in cluster.controllers]
    cluster.cut(controllers, [leader])
    say(f"bytes from the controllers {controllers} to {leader.node_id} dropped (its "
        "AlterPartition answers and metadata)")  # fmt: skip
    cluster.heal_between([f], [leader], listener=CLIENT_LISTENER)
    say(f"replication link between {f.node_id} and {leader.node_id} healed: it catches up and "
        f"{leader.node_id} proposes it into the ISR; the change commits, the answer is held")  # fmt: skip
    _wait_for(f"the controllers count {f.node_id} in the ISR",
              lambda: _isr(cluster) == {leader.node_id, f.node_id, g.node_id}, say)  # fmt: skip
    cluster.partition_halves([f], [leader], listener=CLIENT_LISTENER)
    say(f"replication link between {f.node_id} and {leader.node_id} cut again; load goes on")
    _pause(36)  # the leader's AlterPartition gives up after 30 s of retries; then more writes
    leader.kill9()
    g.kill9()
    say(f"kill -9 of {leader.node_id} and {g.node_id}: only {f.node_id} of the ISR is left")
    _wait_for(f"{f.node_id} leads partition {PARTITION}",
              lambda: leader_of(cluster, TOPIC, PARTITION) == f.node_id, say, timeout=90)  # fmt: skip
    _pause(3)
    cluster.heal()
    say("network healed")
    _restart(say, leader, g)
    _pause(8)


def restarted_follower(injector: Injector, say: Say) -> None:
    cluster = injector.cluster
    leader, f, g = _roles(cluster, say)
    cluster.partition_halves([g], [leader], listener=CLIENT_LISTENER)
    say(f"replication link between {g.node_id} and {leader.node_id} cut")
    _wait_for(f"{g.node_id} left partition {PARTITION}'s ISR",
              lambda: _isr(cluster) == {leader.node_id, f.node_id}, say)  # fmt: skip
    cluster.partition_halves([f], [leader], listener=CLIENT_LISTENER)
    say(f.power_cut(random.Random(2), keep="none"))
    _restart(say, f)
    say(f"{f.node_id} restarted with its replication link to {leader.node_id} cut: it cannot fetch")
    _pause(12)  # two of the leader's ISR checks (replica.lag.time.max.ms / 2 each)
    leader.kill9()
    say(f"kill -9 of the leader {leader.node_id}; partition {PARTITION}'s ISR: {_isr(cluster)}")
    _pause(10)
    cluster.heal()
    say("network healed")
    _restart(say, leader)
    _pause(8)


def restart_same_epoch(injector: Injector, say: Say) -> None:
    cluster = injector.cluster
    leader, f, g = _roles(cluster, say)
    cluster.partition_halves([leader], [f, g], listener=CLIENT_LISTENER)
    say(f"replication links between {leader.node_id} and {[f.node_id, g.node_id]} cut")
    _wait_for(f"partition {PARTITION}'s ISR is the leader alone",
              lambda: _isr(cluster) == {leader.node_id}, say)  # fmt: skip
    say(leader.power_cut(random.Random(3), keep="none"))
    _restart(say, leader)
    _wait_for(f"{leader.node_id} leads partition {PARTITION} again",
              lambda: leader_of(cluster, TOPIC, PARTITION) == leader.node_id, say)  # fmt: skip
    _pause(25)  # new writes on the leader alone, past what its followers hold
    cluster.heal()
    say("network healed")
    _pause(10)


def last_clean_replica(injector: Injector, say: Say) -> None:
    cluster = injector.cluster
    leader, f, g = _roles(cluster, say)
    f.kill9()
    g.kill9()
    say(f"kill -9 of {f.node_id} and {g.node_id}")
    cluster.partition_halves([leader], [f, g], listener=CLIENT_LISTENER)
    _pause(3)
    _restart(say, f, g)
    say(f"{[f.node_id, g.node_id]} restarted with their replication links to {leader.node_id} "
        f"cut; one Metadata answer (what the nemesis's guard used to read): partition "
        f"{PARTITION}'s ISR {sorted(_isr(cluster) or ())}; the guard now: "
        f"{'; '.join(injector.blockers()) or 'may cut'}")  # fmt: skip
    _wait_for(f"{f.node_id} and {g.node_id} registered again and partition {PARTITION}'s ISR "
              f"is {leader.node_id} alone",
              lambda: f.serving and g.serving and _isr(cluster) == {leader.node_id}, say)  # fmt: skip
    say(leader.power_cut(random.Random(4), keep="none"))
    cluster.heal()
    say("network healed")
    _restart(say, leader)
    _pause(10)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("last-replica-standing", last_replica_standing),
        Scenario("unanswered-expansion", unanswered_expansion, split=True,
                 overrides={"broker.session.timeout.ms": "40000"}, message_timeout_ms=180_000,
                 plant="isr-forgets-unanswered-proposal"),
        Scenario("restarted-follower", restarted_follower, plant="isr-trusts-old-incarnation"),
        Scenario("restart-same-epoch", restart_same_epoch,
                 topic_config={"min.insync.replicas": "1"},
                 plant="restart-keeps-leader-epoch", caught_as="replica divergence"),
        Scenario("last-clean-replica", last_clean_replica),
    )
}  # fmt: skip
