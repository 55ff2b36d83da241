"""confluent-kafka (librdkafka) transactions against a `strom serve` process.

A transactional producer commits and aborts; a read_committed consumer sees exactly the
committed records and a read_uncommitted one sees everything; consume-transform-produce with
`send_offsets_to_transaction` commits the group's offsets only with the transaction; a second
producer with the same transactional.id fences the first (zombie fencing), whose next
operation fails fatally; a transaction left open past its timeout is aborted by the broker.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import topic_name
from strom.broker.testing.embedded import BrokerProcess

TIMEOUT = 30.0


def txn_producer(bootstrap: str, txn_id: str, **config: Any) -> Producer:
    producer = ck.producer(bootstrap, **{"transactional.id": txn_id, **config})
    producer.init_transactions(TIMEOUT)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every record a consumer with `isolation` reads from the start, up to the end."""
    consumer: Consumer = ck.consumer(
        bootstrap, **{"isolation.level": isolation, "auto.offset.reset": "earliest"}
    )
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=TIMEOUT, cached=False
            )
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        done: set[int] = set()
        while len(done) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                # read_committed stops at the LSO: caught up once positions reach it
                positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
                for tp in positions:
                    lso = consumer.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)[1]
                    if tp.offset >= 0 and tp.offset >= min(lso, ends[tp.partition]):
                        done.add(tp.partition)
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(msg.partition() or 0)
                    continue
                raise KafkaException(error)
            value = msg.value()
            assert value is not None
            values.append(value)
        return values
    finally:
        consumer.close()


def test_commit_and_abort(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("txn")
    ck.create_topic(ck.admin(bootstrap), topic, 2)
    producer = txn_producer(bootstrap, f"{topic}-tx")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(TIMEOUT)
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"last", partition=0)
    producer.commit_transaction(TIMEOUT)

    committed = read_all(bootstrap, topic, 2, "read_committed")
    assert sorted(committed) == sorted([f"committed-{i}".encode() for i in range(10)] + [b"last"])
    everything = read_all(bootstrap, topic, 2, "read_uncommitted")
    assert len(everything) == 16  # the aborted records are in the log


def test_send_offsets_to_transaction(shared_broker: BrokerProcess) -> None:
    """Consume-transform-produce: the input's offsets commit with the output."""
    bootstrap = shared_broker.bootstrap
    source, sink = topic_name("cts-in"), topic_name("cts-out")
    admin = ck.admin(bootstrap)
    ck.create_topic(admin, source, 1)
    ck.create_topic(admin, sink, 1)
    plain = ck.producer(bootstrap)
    for i in range(6):
        plain.produce(source, f"in-{i}".encode(), partition=0)
    plain.flush(TIMEOUT)

    group = f"{source}-group"
    consumer: Consumer = ck.consumer(
        bootstrap, **{"group.id": group, "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    )
    consumer.subscribe([source])
    producer = txn_producer(bootstrap, f"{source}-tx")
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.value() or b"")
        assert len(seen) == 3
        producer.begin_transaction()
        for value in seen:
            producer.produce(sink, value.upper(), partition=0)
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
        producer.commit_transaction(TIMEOUT)
        committed = consumer.committed([TopicPartition(source, 0)], timeout=TIMEOUT)
        assert committed[0].offset == positions[0].offset

        # an aborted transaction's offsets are not committed
        producer.begin_transaction()
        producer.produce(sink, b"never", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 5)], consumer.consumer_group_metadata(), TIMEOUT
        )
        producer.abort_transaction(TIMEOUT)
        committed = consumer.committed([TopicPartition(source, 0)], timeout=TIMEOUT)
        assert committed[0].offset == positions[0].offset
    finally:
        consumer.close()
    assert sorted(read_all(bootstrap, sink, 1, "read_committed")) == sorted(v.upper() for v in seen)


def test_zombie_is_fenced(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("zombie")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    txn_id = f"{topic}-tx"
    zombie = txn_producer(bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(TIMEOUT)
    successor = txn_producer(bootstrap, txn_id)  # fences the zombie, aborting its transaction
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), error
    assert read_all(bootstrap, topic, 1, "read_committed") == [b"successor"]


def test_open_transaction_is_aborted_after_its_timeout(strom_broker: BrokerProcess) -> None:
    """The broker aborts a transaction its producer abandoned (checked every
    transaction.abort.timed.out.transaction.cleanup.interval.ms)."""
    strom_broker.stop()
    strom_broker.overrides["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "200"
    strom_broker.start()
    bootstrap = strom_broker.bootstrap
    topic = topic_name("timeout")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    abandoned = txn_producer(bootstrap, f"{topic}-tx", **{"transaction.timeout.ms": 2000})
    abandoned.begin_transaction()
    abandoned.produce(topic, b"abandoned", partition=0)
    abandoned.flush(TIMEOUT)
    plain = ck.producer(bootstrap)
    plain.produce(topic, b"after", partition=0)
    plain.flush(TIMEOUT)
    # until the abort, read_committed stops before the open transaction
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if read_all(bootstrap, topic, 1, "read_committed") == [b"after"]:
            break
        time.sleep(0.5)
    assert read_all(bootstrap, topic, 1, "read_committed") == [b"after"]
