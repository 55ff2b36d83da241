"""Kafka Streams with `processing.guarantee=exactly_once_v2` counts exactly on a 3-node Strom
cluster through faults.

A stock Kafka Streams application (kafka-streams 4.1, `wordcount.py`) counts words keyed in a
3-partition input topic, with its state store's changelog and its output on the cluster (all
replicated three times). While an idempotent producer writes the input in phases:

1. the leader of input and output partitions is killed with SIGKILL (not the transaction
   coordinator), then started again;
2. the transaction coordinator (the leader of `__transaction_state`, one partition so it
   coordinates every transactional id) is killed with SIGKILL, then started again;
3. the application itself is killed with SIGKILL in the middle of its work and started again
   on the same state directory (its open transaction must be aborted, its state restored
   from the changelog as of the last commit, and the input read again from the committed
   offsets).

The checker then reads the output with read_committed: every word seen n times in the input
has the counts 1..n in order, no more and no fewer (`wordcount.exact_counts`).

The checker can fail: the same application with `processing.guarantee=at_least_once` (and
offsets committed rarely), killed the same way in the middle of its work, counts again what
it had counted since its last commit, and the checker reports the duplicates.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.cluster.test_replication import settled
from compat_tests.cluster.test_txn_coordinator_failover import TXN_FAST, coordinator
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Deadline, wait_until
from compat_tests.streams.wordcount import (
    Verdict,
    WordCountApp,
    caught_up,
    exact_counts,
    input_counts,
    output_counts,
    read_topic,
    words,
)
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster

INPUT = "wc-words"
OUTPUT = "wc-counts"
PARTITIONS = 3
VOCABULARY = [f"word-{i:02d}" for i in range(40)]
PHASE = 1500
"""Input records per phase: five phases, three of them with a fault."""
OVERRIDES = {
    **TXN_FAST,
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
FINISH = 240.0
"""Seconds the application gets to count everything after the last phase (JVM on a busy
machine, rebalances and restores after the faults)."""


def create_topics(cluster: ClusterProcess) -> None:
    admin = ck.admin(cluster.bootstrap)
    new = [
        ck.NewTopic(name, num_partitions=PARTITIONS, replication_factor=3,
                    config={"min.insync.replicas": "2"})
        for name in (INPUT, OUTPUT)
    ]  # fmt: skip
    for future in admin.create_topics(new, operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    for topic in (INPUT, OUTPUT):
        settled(cluster, topic, 3)


def written(bootstrap: str, topic: str) -> int:
    """Records in the topic, committed or not (the sum of its high watermarks)."""
    consumer = ck.consumer(bootstrap)
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30,
                                           cached=False)[1]
            for p in range(PARTITIONS)
        )  # fmt: skip
    finally:
        consumer.close()


def partition_leader(cluster: ClusterProcess, avoid: ClusterNode) -> ClusterNode:
    """A node leading input and output partitions that is not `avoid`."""
    leaders = Counter(
        cluster.leader(topic, p) for topic in (INPUT, OUTPUT) for p in range(PARTITIONS)
    )
    for node_id, _count in leaders.most_common():
        if node_id != avoid.node_id:
            return cluster.node(node_id)
    other = next(n for n in cluster.nodes if n is not avoid)
    cluster.move_leader(OUTPUT, 0, other.node_id)
    return other


class Input:
    """The idempotent producer of the input, and what it was asked to write."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = ck.producer(
            bootstrap, **{"enable.idempotence": True, "message.timeout.ms": 180_000}
        )
        self.sent: Counter[str] = Counter()
        self.failed: list[str] = []

    def send(self, count: int) -> None:
        """Queue `count` words (acknowledged later, by `flush`)."""
        start = sum(self.sent.values())
        for word in words(count, start, VOCABULARY):
            while True:
                try:
                    self.producer.produce(INPUT, word.encode(), word.encode(),
                                          on_delivery=self._report)  # fmt: skip
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self.sent[word] += 1

    def _report(self, err: object, _msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))

    def flush(self) -> None:
        assert self.producer.flush(200) == 0, "input not acknowledged"
        assert not self.failed, f"input delivery failed: {self.failed[:3]}"


def progressed(bootstrap: str, past: int) -> int | None:
    now = written(bootstrap, OUTPUT)
    return now if now >= past else None


def kill_a_leader_then_the_coordinator(
    cluster: ClusterProcess, source: Input, app: WordCountApp
) -> None:
    """Faults 1 and 2 of the module docstring, each while a phase of input is written."""
    # 1. kill -9 of a partition leader (input and output partitions), not the coordinator
    victim = partition_leader(cluster, avoid=coordinator(cluster))
    source.send(PHASE)
    victim.kill9()
    source.flush()
    app.check_alive()
    cluster.restart(victim)
    for topic in (INPUT, OUTPUT):
        settled(cluster, topic, 3)

    # 2. kill -9 of the transaction coordinator
    old = coordinator(cluster)
    source.send(PHASE)
    old.kill9()
    source.flush()
    app.check_alive()
    cluster.restart(old)
    settled(cluster, "__transaction_state", 3)


def run_word_count(
    strom_cluster: StartCluster,
    tmp_path: Path,
    classpath: str,
    guarantee: str,
    *,
    broker_faults: bool = True,
    commit_interval_ms: int | None = None,
) -> Verdict:
    """The scenario of the module docstring (without the broker kills when `broker_faults` is
    false: their phases are written without a fault); the checker's verdict."""
    cluster = strom_cluster(combined=3, overrides=OVERRIDES)
    wait_for_leader(cluster)
    create_topics(cluster)
    app = WordCountApp(classpath, tmp_path / "app", cluster.bootstrap, "wordcount", INPUT,
                       OUTPUT, guarantee, commit_interval_ms)  # fmt: skip
    source = Input(cluster.bootstrap)
    try:
        app.start()
        app.wait_running()
        source.send(PHASE)
        source.flush()
        wait_until(lambda: progressed(cluster.bootstrap, PHASE // 3), timeout=FINISH,
                   what="the application counting")  # fmt: skip

        if broker_faults:
            kill_a_leader_then_the_coordinator(cluster, source, app)
        else:
            source.send(2 * PHASE)
            source.flush()

        # 3. kill -9 of the application in the middle of its work; started again
        before = written(cluster.bootstrap, OUTPUT)
        source.send(PHASE)
        source.flush()
        wait_until(lambda: progressed(cluster.bootstrap, before + PHASE // 4), timeout=FINISH,
                   what="the application counting the fourth phase")  # fmt: skip
        app.kill9()
        app.start()
        app.wait_running(FINISH)

        source.send(PHASE)
        source.flush()
        deadline = Deadline(FINISH)
        while True:
            app.check_alive()
            inputs = input_counts(read_topic(cluster.bootstrap, INPUT, PARTITIONS,
                                             "read_uncommitted"))  # fmt: skip
            outputs = output_counts(read_topic(cluster.bootstrap, OUTPUT, PARTITIONS,
                                               "read_committed"))  # fmt: skip
            if caught_up(inputs, outputs) or deadline.expired:
                break
        assert inputs == source.sent, "the input topic is not what the idempotent producer sent"
        return exact_counts(inputs, outputs)
    except BaseException as exc:
        raise AssertionError(f"{exc}\n--- Kafka Streams log (tail) ---\n{app.tail()}") from exc
    finally:
        app.stop()


@pytest.mark.timeout(900)
def test_exactly_once_v2_counts_exactly_through_kill9s(
    strom_cluster: StartCluster, tmp_path: Path, wordcount_classpath: str
) -> None:
    verdict = run_word_count(strom_cluster, tmp_path, wordcount_classpath, "exactly_once_v2")
    print(verdict)  # the numbers, for `pytest -s`
    assert verdict.exact, verdict
    assert verdict.expected == 5 * PHASE


@pytest.mark.timeout(600)
def test_the_checker_catches_at_least_once_counting_twice(
    strom_cluster: StartCluster, tmp_path: Path, wordcount_classpath: str
) -> None:
    verdict = run_word_count(strom_cluster, tmp_path, wordcount_classpath, "at_least_once",
                             broker_faults=False, commit_interval_ms=600_000)  # fmt: skip
    print(verdict)  # the numbers, for `pytest -s`
    assert not verdict.exact, verdict
    assert verdict.duplicated > 0, verdict
