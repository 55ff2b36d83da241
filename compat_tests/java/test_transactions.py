"""The Java producer's transactions (kafka-clients 3.9: transactions v1; 4.x: transactions v2
when the cluster finalized transaction.version 2, v1 otherwise): commit and abort seen by
read_committed and read_uncommitted consumers, consume-transform-produce with
sendOffsetsToTransaction, a zombie fenced by its successor, the same on three brokers, and a
transaction whose coordinator is killed with SIGKILL while it is open."""

from __future__ import annotations

import threading
from pathlib import Path

import trio

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.cluster.test_txn_coordinator_failover import TXN_FAST, coordinator
from compat_tests.helpers import wait_until
from compat_tests.java.harness import Events, JavaHarness
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.cluster import ClusterProcess
from strom.broker.testing.embedded import BrokerProcess
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)


def producer_epoch(broker: BrokerProcess, transactional_id: str) -> int:
    async def describe() -> int:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            request = DescribeTransactionsRequest(transactional_ids=[transactional_id])
            response = await client.request(request, 0, DescribeTransactionsResponse)
            return response.transaction_states[0].producer_epoch
        finally:
            await client.aclose()

    return trio.run(describe)


def test_commit_and_abort(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "transactions", topic="jtxn")
    committed = events.one("read", isolation="read_committed")["values"]
    assert sorted(committed) == sorted([f"c{i}" for i in range(10)] + ["last"])
    everything = events.one("read", isolation="read_uncommitted")["values"]
    assert sorted(everything) == sorted(committed + [f"a{i}" for i in range(5)])
    # kafka-clients 4.x runs transactions v2 on a new cluster (transaction.version 2): each of
    # its three transactions bumped the epoch; 3.9 keeps the epoch InitProducerId gave it
    expected = 3 if java_harness.client == "4.x" else 0
    assert producer_epoch(strom_broker, "jtxn-tx") == expected


def test_consume_transform_produce(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "consume-transform-produce", topic="jcts")
    assert events.one("committed")["offset"] == 3
    assert events.one("after_abort")["offset"] == 3
    assert events.one("sink")["values"] == ["IN0", "IN1", "IN2"]


def test_zombie_fencing(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "zombie", topic="jzombie")
    outcome = events.one("zombie_commit")["outcome"]
    assert outcome["error"] in ("ProducerFencedException", "InvalidProducerEpochException"), outcome
    assert events.one("read")["values"] == ["successor"]


class ClusterTarget:
    """A cluster as the harness's target: its bootstrap address and every node's log."""

    def __init__(self, cluster: ClusterProcess) -> None:
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def output(self) -> list[str]:
        return self.cluster.report(40).splitlines()


def test_transactions_on_three_brokers(
    java_harness: JavaHarness, strom_cluster: StartCluster
) -> None:
    """The same scenarios on a 3-node cluster whose transaction state and topics are
    replicated three ways: the producer's coordinator, the partitions' leaders and the group
    coordinator are different brokers, so verification (v1) or the implicit adds (v2), the
    markers and the offsets' markers all travel between brokers."""
    cluster = strom_cluster(
        combined=3,
        overrides={
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.num.partitions": "3",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "3",
            "default.replication.factor": "3",
        },
    )
    wait_for_leader(cluster)
    target = ClusterTarget(cluster)
    events = java_harness.run(target, "transactions", topic="ctxn", timeout=180)
    committed = events.one("read", isolation="read_committed")["values"]
    assert sorted(committed) == sorted([f"c{i}" for i in range(10)] + ["last"])
    events = java_harness.run(target, "consume-transform-produce", topic="ccts", timeout=180)
    assert events.one("committed")["offset"] == 3
    assert events.one("after_abort")["offset"] == 3
    assert events.one("sink")["values"] == ["IN0", "IN1", "IN2"]


def test_coordinator_killed_mid_transaction(
    java_harness: JavaHarness, strom_cluster: StartCluster, tmp_path: Path
) -> None:
    """kill -9 of the transaction coordinator (the leader of `__transaction_state`'s one
    partition) while a transaction is open with six records acknowledged: the producer sends
    six more and commits through the new coordinator, which loaded the transaction from the
    replicated log; a read_committed consumer reads all twelve and the next transaction's
    record, once each."""
    cluster = strom_cluster(
        combined=3,
        overrides={
            **TXN_FAST,
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "3",
            "default.replication.factor": "3",
        },
    )
    wait_for_leader(cluster)
    signals = tmp_path / "signals"
    signals.mkdir()
    outcome: dict[str, Events | BaseException] = {}

    def scenario() -> None:
        try:
            outcome["events"] = java_harness.run(
                ClusterTarget(cluster), "coordinator-kill", topic="ckill", signals=signals,
                timeout=300,
            )  # fmt: skip
        except BaseException as e:  # reported by the test's thread below
            outcome["error"] = e

    thread = threading.Thread(target=scenario, daemon=True)
    thread.start()
    wait_until(
        lambda: (signals / "open").exists() or not thread.is_alive(),
        timeout=180, what="the transaction to be open",
    )  # fmt: skip
    if (signals / "open").exists():
        victim = coordinator(cluster)
        cluster.kill(victim)
        (signals / "killed").touch()
    thread.join(330)
    assert not thread.is_alive(), "the Java scenario did not end"
    error = outcome.get("error")
    if isinstance(error, BaseException):
        raise error
    events = outcome["events"]
    assert isinstance(events, Events)
    values = events.one("read")["values"]
    assert sorted(values) == sorted([f"t{i}" for i in range(12)] + ["next"])
