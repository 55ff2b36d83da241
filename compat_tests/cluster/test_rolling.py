"""Controlled shutdown and rolling restarts of a 3-node combined cluster under load (issue 12).

A cluster broker that gets SIGTERM first asks the controller to move its leaderships away
(BrokerHeartbeat want_shut_down) and stops serving only once told it may: a producer sees its
partition's leader change (NOT_LEADER_OR_FOLLOWER, retried by the client) instead of a dead
connection and a wait for the session timeout. So:

- SIGTERM of the leader of an RF=3 acks=all topic while an idempotent confluent-kafka producer
  runs: no produce error reaches the application, and the stall (the longest time between two
  acknowledgements) is short; it is printed.
- A rolling restart (each node in turn: SIGTERM, wait until it is gone, start, wait until it is
  back in the ISR) under an idempotent acks=all producer and a consumer: every acknowledged record
  is read exactly once at the end, and the longest producer stall stays within the broker
  session timeout (the time a crashed leader's partitions wait for an election); printed.

The load is paced (a produce every PACE seconds), so a stall is a gap between acknowledgements,
not a full queue; the assertions are on what the clients saw.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message, TopicPartition

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.cluster.test_replication import (
    FAST,
    consume_all,
    create,
    partition_state,
    settled,
)
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import wait_until
from strom.broker.testing.cluster import ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster

PACE = 0.002
"""Seconds between two produce() calls of the load (about 500 records/s offered)."""
SESSION_TIMEOUT_S = int(FAST["broker.session.timeout.ms"]) / 1000


@dataclass
class Load:
    """An idempotent acks=all producer on its own thread, until `stop`: what it saw."""

    bootstrap: str
    topic: str
    acked: list[tuple[float, int, bytes]] = field(default_factory=list)
    """(monotonic time, offset, value) of every acknowledgement, in arrival order."""
    errors: list[str] = field(default_factory=list)
    sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="load-producer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        producer = ck.producer(
            self.bootstrap,
            **{"enable.idempotence": True, "message.timeout.ms": 120000, "linger.ms": 2},
        )

        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked.append((time.monotonic(), msg.offset() or 0, msg.value() or b""))

        while not self._stop.is_set():
            producer.produce(self.topic, value=f"v{self.sent}".encode(), partition=0,
                             on_delivery=report)  # fmt: skip
            self.sent += 1
            producer.poll(PACE)
        if producer.flush(120) != 0:
            self.errors.append("flush left records undelivered")

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(150)

    def acks_since(self, count: int) -> bool:
        return len(self.acked) >= count

    def longest_stall(self) -> tuple[float, float]:
        """(longest gap between two acknowledgements, when it began, relative to the first)."""
        times = [t for t, _, _ in self.acked]
        gaps = [(b - a, a - times[0]) for a, b in itertools.pairwise(times)]
        return max(gaps) if gaps else (0.0, 0.0)


@dataclass
class Tail:
    """A consumer reading the partition on its own thread while the load runs."""

    bootstrap: str
    topic: str
    read: int = 0
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="load-consumer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = ck.consumer(self.bootstrap)
        try:
            consumer.assign([TopicPartition(self.topic, 0, 0)])
            while not self._stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self.errors.append(str(msg.error()))
                else:
                    self.read += 1
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)


def _check_everything_once(cluster: ClusterProcess, load: Load) -> None:
    """Every acknowledged value is read exactly once, in one offset each."""
    assert not load.errors, load.errors[:5]
    assert len(load.acked) == load.sent
    acked_values = [v for _, _, v in load.acked]
    assert len(set(acked_values)) == len(acked_values)
    read = consume_all(cluster.bootstrap, load.topic, len(acked_values))
    assert len(read) == len(acked_values)
    assert len(set(read)) == len(read), "a record was written twice"
    assert set(read) == set(acked_values)
    offsets = sorted(o for _, o, _ in load.acked)
    assert offsets == list(range(len(offsets)))


def test_sigterm_of_the_leader_moves_leadership_before_it_stops(
    strom_cluster: StartCluster,
) -> None:
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "sigterm-leader"
    create(cluster, topic, replicas=3, min_insync=2)
    leader, _ = settled(cluster, topic, 3)

    load = Load(cluster.bootstrap, topic)
    load.start()
    wait_until(lambda: load.acks_since(300), timeout=30, what="the load's first acks")
    before = len(load.acked)
    began = time.monotonic()
    code = cluster.node(leader).stop()
    stopped = time.monotonic() - began
    new_leader, isr = settled(cluster, topic, 2)
    wait_until(lambda: load.acks_since(before + 500), timeout=30,
               what="acks after the stop")  # fmt: skip
    load.stop()

    stall, at = load.longest_stall()
    print(f"\nSIGTERM of leader {leader}: exit code {code} after {stopped * 1000:.0f} ms; "
          f"leader now {new_leader} (ISR {isr}); {len(load.acked)} acks, longest stall "
          f"{stall * 1000:.0f} ms (at {at:.2f}s), {len(load.errors)} produce errors")  # fmt: skip
    assert code == 0
    assert new_leader != leader
    assert "controlled shutdown: done" in cluster.node(leader).tail(200)
    _check_everything_once(cluster, load)
    assert stall < SESSION_TIMEOUT_S / 2, f"a {stall:.2f}s stall: leadership moved too late"


def test_rolling_restart_under_load_loses_nothing(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "rolling"
    create(cluster, topic, replicas=3, min_insync=2)
    settled(cluster, topic, 3)

    load = Load(cluster.bootstrap, topic)
    tail = Tail(cluster.bootstrap, topic)
    load.start()
    tail.start()
    wait_until(lambda: load.acks_since(300), timeout=30, what="the load's first acks")
    timings: list[str] = []
    for node in cluster.nodes:
        began = time.monotonic()
        assert node.stop() == 0
        down = time.monotonic() - began
        node.start()
        node.wait_started()
        back = wait_until(lambda n=node.node_id: _in_isr(cluster, topic, n), timeout=60,  # type: ignore[misc]
                          what=f"node {node.node_id} back in the ISR", interval=0.1)  # fmt: skip
        timings.append(f"node {node.node_id}: stopped in {down * 1000:.0f} ms, back in the ISR "
                       f"{(time.monotonic() - began):.1f}s after SIGTERM (leader {back})")  # fmt: skip
        before = len(load.acked)
        wait_until(lambda b=before: load.acks_since(b + 100), timeout=30,  # type: ignore[misc]
                   what="acks after the restart")  # fmt: skip
    load.stop()
    tail.stop()

    stall, at = load.longest_stall()
    span = load.acked[-1][0] - load.acked[0][0]
    print("\nrolling restart of 3 combined nodes under load:\n  " + "\n  ".join(timings)
          + f"\n  {len(load.acked)} acks in {span:.1f}s ({len(load.acked) / span:.0f}/s), "
          f"longest stall {stall * 1000:.0f} ms (at {at:.2f}s; bound "
          f"{SESSION_TIMEOUT_S * 1000:.0f} ms), consumer read {tail.read} while running, "
          f"{len(load.errors)} produce errors")  # fmt: skip
    assert not tail.errors, tail.errors[:5]
    assert tail.read > 0
    _check_everything_once(cluster, load)
    assert stall < SESSION_TIMEOUT_S, f"a {stall:.2f}s stall exceeds the election time"


def _in_isr(cluster: ClusterProcess, topic: str, node_id: int) -> int | None:
    """The leader, once every live node reports `node_id` in an ISR of 3 with a live leader."""
    states = [partition_state(n, topic) for n in cluster.nodes if n.alive]
    if not states or any(s is None for s in states):
        return None
    leaders = {s[0] for s in states if s is not None}
    if len(leaders) != 1 or not all(s is not None and node_id in s[1] and len(s[1]) == 3
                                    for s in states):  # fmt: skip
        return None
    [leader] = leaders
    return leader if leader >= 0 else None
