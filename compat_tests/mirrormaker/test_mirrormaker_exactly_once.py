"""MirrorMaker 2 with exactly-once delivery (KIP-618's exactly-once source tasks, dedicated
mode) between two Strom brokers.

MirrorMaker is configured as Kafka's documentation says for exactly-once: the target's
Connect worker has `exactly.once.source.support=enabled` (each source task writes its records
and its source offsets in one transaction per poll, and a new task generation fences the old
one's transactional producers), the internal REST server is on
(`dedicated.mode.enable.internal.rest`), and the source is read with `read_committed`.

The source topic is written by a transactional producer: transactions of 50 records, one in
five aborted. A writer thread keeps writing (up to 400 transactions) while MirrorMaker copies; MirrorMaker is killed
with SIGKILL in the middle and started again. A read_committed consumer of the copy on the
target then reads, partition by partition, exactly the committed records of the source, in
order, each once: nothing aborted on the source is copied, nothing that the killed task had
written in its open transaction shows, nothing is copied twice after the restart. The target
broker lists MirrorMaker's transactional ids (ListTransactions), so the copy really went
through transactions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import KafkaException, Producer, TopicPartition

from compat_tests.apache_kafka import free_port
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import wait_until
from compat_tests.mirrormaker.mm2 import MirrorMaker2
from compat_tests.streams.wordcount import read_topic
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import BrokerProcess
from strom.wire.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)

TOPIC = "eos-orders"
REPLICA = f"A.{TOPIC}"
PARTITIONS = 2
BATCH = 50
"""Records per source transaction."""
LIMIT = 400
"""Source transactions at most (20,000 records): the writer is faster than MirrorMaker, so a
bounded backlog keeps the copy's end within the test's time."""
REPLICATION = 180.0
"""Seconds MirrorMaker gets to start (a JVM on a busy machine) and copy."""


@pytest.fixture
def cluster_a(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "a") as broker:
        yield broker


@pytest.fixture
def cluster_b(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "b") as broker:
        yield broker


class SourceWriter:
    """Transactions of BATCH records to the source, alternating partitions, one in five
    aborted; run in a thread until stopped (or LIMIT transactions)."""

    def __init__(self, bootstrap: str) -> None:
        self.producer: Producer = ck.producer(
            bootstrap, **{"transactional.id": "eos-source", "transaction.timeout.ms": 60_000}
        )
        self.producer.init_transactions(30)
        self.transactions = 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def transaction(self) -> None:
        n = self.transactions
        commit = n % 5 != 3
        self.producer.begin_transaction()
        for i in range(BATCH):
            value = f"{'c' if commit else 'aborted'}-{n}-{i}"
            self.producer.produce(TOPIC, value.encode(), partition=(n + i) % PARTITIONS)
        if commit:
            self.producer.commit_transaction(30)
        else:
            self.producer.flush(30)
            self.producer.abort_transaction(30)
        self.transactions += 1

    def _run(self) -> None:
        try:
            while not self.stopping.is_set() and self.transactions < LIMIT:
                self.transaction()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)
        if self.error is not None:
            raise AssertionError(f"the source writer failed: {self.error!r}")


def high_watermarks(bootstrap: str, topic: str) -> int | None:
    """Records in the topic, committed or not (None while it does not exist yet, or has no
    leader yet)."""
    consumer = ck.consumer(bootstrap)
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return None
        total = 0
        for p in found.partitions:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=10, cached=False
            )
            total += int(high)
        return total
    except KafkaException:  # a topic MirrorMaker just created: its leader not known yet
        return None
    finally:
        consumer.close()


def transactional_ids(bootstrap: str) -> list[str]:
    async def ask() -> list[str]:
        client = await KafkaClient.connect(bootstrap)
        try:
            response = await client.request(
                ListTransactionsRequest(state_filters=[], producer_id_filters=[]),
                0,
                ListTransactionsResponse,
            )
            return [t.transactional_id for t in response.transaction_states]
        finally:
            await client.aclose()

    return trio.run(ask)


def committed_values(bootstrap: str, topic: str) -> dict[int, list[bytes | None]]:
    read = read_topic(bootstrap, topic, PARTITIONS, "read_committed")
    return {p: [value for _key, value in records] for p, records in read.items()}


@pytest.mark.timeout(900)
def test_exactly_once_copy_through_kill9_of_mirrormaker(
    cluster_a: BrokerProcess, cluster_b: BrokerProcess, tmp_path: Path
) -> None:
    admin = ck.admin(cluster_a.bootstrap)
    admin.create_topics([ck.NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    writer = SourceWriter(cluster_a.bootstrap)
    for _ in range(20):  # a backlog to copy before the kill
        writer.transaction()
    mm2 = MirrorMaker2(
        tmp_path / "mm2",
        {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
        {"A->B": {"topics": TOPIC, "groups": "none"}},
        {
            "B.exactly.once.source.support": "enabled",
            "A.consumer.isolation.level": "read_committed",
            "dedicated.mode.enable.internal.rest": "true",
            "listeners": f"http://127.0.0.1:{free_port()}",
            "emit.checkpoints.enabled": "false",
            "sync.group.offsets.enabled": "false",
            "sync.topic.acls.enabled": "false",
        },
    )

    def copied(at_least: int) -> int | None:
        mm2.check_alive()
        found = high_watermarks(cluster_b.bootstrap, REPLICA)
        return found if found is not None and found >= at_least else None

    try:
        mm2.start()
        wait_until(lambda: copied(1), timeout=REPLICATION, what=f"{REPLICA} on B")
        writer.start()
        before = high_watermarks(cluster_b.bootstrap, REPLICA) or 0
        wait_until(lambda: copied(before + 10 * BATCH), timeout=REPLICATION,
                   what="MirrorMaker copying while the source is written")  # fmt: skip
        assert mm2.process is not None
        mm2.process.kill()  # kill -9, in the middle of copying
        mm2.process.wait()
        mm2.start()
        before = high_watermarks(cluster_b.bootstrap, REPLICA) or 0
        wait_until(lambda: copied(before + 10 * BATCH), timeout=REPLICATION,
                   what="MirrorMaker copying again after its restart")  # fmt: skip
        writer.stop()
        source = committed_values(cluster_a.bootstrap, TOPIC)
        expected = sum(len(v) for v in source.values())

        def caught_up() -> dict[int, list[bytes | None]] | None:
            mm2.check_alive()
            target = committed_values(cluster_b.bootstrap, REPLICA)
            return target if sum(len(v) for v in target.values()) >= expected else None

        target = wait_until(caught_up, timeout=REPLICATION, what="every committed record copied",
                            interval=1.0)  # fmt: skip
        for p in range(PARTITIONS):
            assert all(v is not None and v.startswith(b"c-") for v in source[p])
            assert target[p] == source[p], (
                f"partition {p}: {len(target[p])} copied, {len(set(target[p]))} distinct, "
                f"{len(source[p])} committed on the source"
            )
        assert writer.transactions > 40
        ids = transactional_ids(cluster_b.bootstrap)
        assert any("MirrorSourceConnector" in i for i in ids), ids
    except BaseException as exc:
        (tmp_path / "target-broker.log").write_text("\n".join(cluster_b.output) + "\n")
        target_log = "\n".join(
            line
            for line in cluster_b.output
            if "WARN" in line or "ERROR" in line or "txn" in line or "transaction" in line
        )
        raise AssertionError(
            f"{exc}\nMirrorMaker 2 log:\n{mm2.tail()}\n--- target broker (B) warnings and "
            f"transactions ---\n{target_log[-6000:]}"
        ) from exc
    finally:
        writer.stopping.set()
        mm2.stop()
