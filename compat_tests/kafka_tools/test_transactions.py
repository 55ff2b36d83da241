"""kafka-transactions.sh (TransactionsCommand): list, describe, describe-producers, abort and
find-hanging against a `strom serve` process.

A hanging transaction is made the way Kafka's tool exists for: a transactional batch written
to a partition the coordinator never heard of (verification off, an old-style Produce), so
that the partition's last stable offset is stuck until an operator aborts it.
"""

from __future__ import annotations

import time

import pytest
import trio
from confluent_kafka import TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import topic_name
from compat_tests.kafka_tools.tools import KafkaTools, ToolResult
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import BrokerProcess
from strom.wire.messages.produce import ProduceResponse
from tests.broker.test_produce_helpers import batch, produce_request

TIMEOUT = 30.0


def rows(result: ToolResult) -> list[dict[str, str]]:
    """A tab- or space-aligned table the tool printed, one dict per row keyed by the header."""
    header, *lines = result.lines
    names = header.split()
    return [dict(zip(names, line.split(), strict=True)) for line in lines]


@pytest.fixture
def broker(strom_broker: BrokerProcess) -> BrokerProcess:
    """A broker that lets a transactional batch in unverified (Produce v11 and older)."""
    strom_broker.stop()
    strom_broker.overrides["transaction.partition.verification.enable"] = "false"
    strom_broker.start()
    return strom_broker


def test_list_and_describe(kafka_tools: KafkaTools, broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = topic_name("tools-txn")
    ck.create_topic(ck.admin(bootstrap), topic, 2)
    producer = ck.producer(bootstrap, **{"transactional.id": f"{topic}-tx"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=1)
    producer.flush(TIMEOUT)

    listed = rows(kafka_tools.run("kafka-transactions", "--bootstrap-server", bootstrap, "list"))
    [mine] = [r for r in listed if r["TransactionalId"] == f"{topic}-tx"]
    assert mine["TransactionState"] == "Ongoing"
    assert mine["Coordinator"] == "1"

    def listed_ids(*filters: str) -> list[str]:
        result = kafka_tools.run("kafka-transactions", "--bootstrap-server", bootstrap, "list", *filters)
        return [r["TransactionalId"] for r in rows(result) if r["TransactionalId"].startswith(topic)]

    # Kafka 4.1's filters: a transactional id pattern (ListTransactions v2, the whole id
    # matched) and a duration (v1: open longer than it)
    assert listed_ids("--transactional-id-pattern", f"{topic}-t.") == [f"{topic}-tx"]
    assert listed_ids("--transactional-id-pattern", "tools-txn") == []
    assert listed_ids("--duration-filter", "0") == [f"{topic}-tx"]
    assert listed_ids("--duration-filter", "3600000") == []
    bad = kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "list",
        "--transactional-id-pattern", "(unclosed", check=False,
    )  # fmt: skip
    # the 4.1 admin client reports Kafka's error code as unexpected, as against Kafka itself
    assert bad.code != 0, bad.describe()
    assert "INVALID_REGULAR_EXPRESSION" in bad.stderr, bad.describe()

    described = rows(kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "describe",
        "--transactional-id", f"{topic}-tx",
    ))  # fmt: skip
    [row] = described
    assert row["TransactionState"] == "Ongoing"
    assert row["TopicPartitions"] == f"{topic}-1"
    assert row["ProducerId"] == mine["ProducerId"]

    producers = rows(kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "describe-producers",
        "--topic", topic, "--partition", "1",
    ))  # fmt: skip
    [producer_row] = producers
    assert producer_row["ProducerId"] == mine["ProducerId"]
    assert producer_row["CurrentTransactionStartOffset"] == "0"
    producer.commit_transaction(TIMEOUT)


def test_find_hanging_and_abort(kafka_tools: KafkaTools, broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = topic_name("hanging")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    pid = 987_654

    async def hang() -> int:
        client = await KafkaClient.connect(bootstrap)
        try:
            records = batch([b"hanging"], pid=pid, epoch=3, seq=0, transactional=True)
            request = produce_request(topic, records, txn="nobody-knows")
            response = await client.request(request, 9, ProduceResponse)
            return response.responses[0].partition_responses[0].error_code
        finally:
            await client.aclose()

    assert trio.run(hang) == 0
    time.sleep(1.1)  # find-hanging looks at transactions open longer than its timeout
    hanging = kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "find-hanging",
        "--broker-id", "1", "--max-transaction-timeout", "0",
    )  # fmt: skip
    [row] = [r for r in rows(hanging) if r["Topic"] == topic]
    assert (row["Partition"], row["ProducerId"], row["StartOffset"]) == ("0", str(pid), "0")
    by_partition = kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "find-hanging",
        "--topic", topic, "--partition", "0", "--max-transaction-timeout", "0",
    )  # fmt: skip
    assert [(r["Topic"], r["ProducerId"]) for r in rows(by_partition)] == [(topic, str(pid))]

    kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "abort",
        "--topic", topic, "--partition", "0", "--start-offset", "0",
    )  # fmt: skip
    producers = rows(kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "describe-producers",
        "--topic", topic, "--partition", "0",
    ))  # fmt: skip
    [producer_row] = producers
    assert producer_row["CurrentTransactionStartOffset"] == "None"
    # the partition's last stable offset moved past the aborted transaction
    consumer = ck.consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, 0), timeout=TIMEOUT, cached=False
        )
        assert (low, high) == (0, 2)  # the batch and its ABORT marker
    finally:
        consumer.close()


def test_abort_by_producer(kafka_tools: KafkaTools, broker: BrokerProcess) -> None:
    """`abort` naming the producer, its epoch and the coordinator epoch (the form for a
    partition whose start offset the operator does not have), then the hanging transaction's
    partition serves read_committed consumers past it."""
    bootstrap = broker.bootstrap
    topic = topic_name("hanging-pid")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    pid = 987_655

    async def hang() -> int:
        client = await KafkaClient.connect(bootstrap)
        try:
            records = batch([b"hanging"], pid=pid, epoch=5, seq=0, transactional=True)
            request = produce_request(topic, records, txn="nobody-knows-either")
            response = await client.request(request, 9, ProduceResponse)
            return response.responses[0].partition_responses[0].error_code
        finally:
            await client.aclose()

    assert trio.run(hang) == 0
    kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "abort",
        "--topic", topic, "--partition", "0", "--producer-id", str(pid),
        "--producer-epoch", "5", "--coordinator-epoch", "0",
    )  # fmt: skip
    [producer_row] = rows(kafka_tools.run(
        "kafka-transactions", "--bootstrap-server", bootstrap, "describe-producers",
        "--topic", topic, "--partition", "0",
    ))  # fmt: skip
    assert (producer_row["ProducerId"], producer_row["CurrentTransactionStartOffset"]) == (
        str(pid), "None"
    )
    consumer = ck.consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, 0), timeout=TIMEOUT, cached=False
        )
        assert (low, high) == (0, 2)
    finally:
        consumer.close()
