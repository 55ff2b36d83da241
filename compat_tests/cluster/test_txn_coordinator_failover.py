"""Transactions across kill -9 of the transaction coordinator, in a 3-node combined cluster of
`strom serve` children with a stock client (confluent-kafka).

`__transaction_state` has one partition replicated three times, so one broker coordinates
every transactional id; it is killed with SIGKILL:

- in the middle of a transaction (records produced, not committed): the producer's commit
  goes to the new coordinator, which loaded the transaction from the replicated log, and a
  read_committed consumer then sees every record exactly once;
- right after a commit was acknowledged: the outcome was written before the answer, so the
  new coordinator finishes writing the markers it finds prepared, and the committed records
  become readable; the producer carries on with its next transaction.
"""

from __future__ import annotations

from confluent_kafka import KafkaException, Producer, TopicPartition

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.cluster.test_replication import FAST, create, settled, values
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Deadline
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster

TXN_STATE = "__transaction_state"
TXN_FAST = {
    **FAST,
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "1",  # one coordinator for every transactional id
}
TIMEOUT = 60.0


def coordinator(cluster: ClusterProcess) -> ClusterNode:
    leader, isr = settled(cluster, TXN_STATE, 3)
    assert isr == [1, 2, 3]
    return cluster.node(leader)


def retrying(action: str, call: object, timeout: float = TIMEOUT) -> None:
    """A transactional call, retried while librdkafka says so (the coordinator moving)."""
    deadline = Deadline(timeout)
    while True:
        try:
            call()  # type: ignore[operator]
            return
        except KafkaException as exc:
            error = exc.args[0]
            if deadline.expired or not error.retriable():
                raise AssertionError(f"{action}: {error}") from exc


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """What a read_committed consumer reads from the start to the end offset (asked again
    while the partition's leadership moves after a kill)."""
    deadline = Deadline(TIMEOUT)
    while True:
        try:
            return _read_committed(bootstrap, topic)
        except KafkaException:
            if deadline.expired:
                raise


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = ck.consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        _low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, 0), timeout=TIMEOUT, cached=False
        )
        out: list[bytes] = []
        deadline = Deadline(TIMEOUT)
        while not deadline.expired:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is None:
                    out.append(msg.value() or b"")
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            if position >= high:
                break
        return out
    finally:
        consumer.close()


def test_transactions_survive_kill9_of_the_coordinator(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, overrides=TXN_FAST)
    wait_for_leader(cluster)
    topic = "ledger"
    create(cluster, topic, replicas=3, min_insync=2)
    settled(cluster, topic, 3)

    producer: Producer = ck.producer(
        cluster.bootstrap,
        **{"transactional.id": "ledger-tx", "transaction.timeout.ms": 60000},
    )
    retrying("init_transactions", lambda: producer.init_transactions(TIMEOUT))
    first = list(values(100))
    producer.begin_transaction()
    for value in first:
        producer.produce(topic, value, partition=0)
    producer.flush(TIMEOUT)

    old = coordinator(cluster)
    old.kill9()  # mid-transaction
    retrying("commit_transaction", lambda: producer.commit_transaction(TIMEOUT))
    survivors = ",".join(n.bootstrap for n in cluster.nodes if n is not old)
    assert read_committed(survivors, topic) == first

    old.restart(clean=False)
    settled(cluster, TXN_STATE, 3)
    second = list(values(50, 100))
    producer.begin_transaction()
    for value in second:
        producer.produce(topic, value, partition=0)
    retrying("commit_transaction", lambda: producer.commit_transaction(TIMEOUT))
    current = coordinator(cluster)
    current.kill9()  # right after the commit was acknowledged
    survivors = ",".join(n.bootstrap for n in cluster.nodes if n is not current)
    assert read_committed(survivors, topic) == first + second

    # the producer goes on with the next transaction on the new coordinator
    producer.begin_transaction()
    producer.produce(topic, b"after", partition=0)
    retrying("commit_transaction", lambda: producer.commit_transaction(TIMEOUT))
    assert read_committed(survivors, topic) == [*first, *second, b"after"]
    current.restart(clean=False)
    settled(cluster, TXN_STATE, 3)
