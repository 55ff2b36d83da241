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
