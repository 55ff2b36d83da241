"""read_committed consumers (librdkafka) of transactional data in a `strom serve` process.

Two transactional producers interleave commits and aborts with plain records on one
partition whose segments are small (so transactions span segments and the aborted-transaction
index of one segment names data in another). A read_committed consumer reads exactly the plain
and committed records, in offset order, and stops at the first offset of the transaction still
open; a read_uncommitted one reads everything. The same holds after a clean restart and after
a kill -9 (the `.txnindex` files are then rebuilt from the log). A read_committed consumer
waiting at an open transaction gets nothing past it until it commits, then everything.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import topic_name
from strom.broker.testing.embedded import BrokerProcess

TIMEOUT = 30.0
SMALL_SEGMENTS = {"segment.bytes": "2048"}


def txn_producer(bootstrap: str, txn_id: str) -> Producer:
    # a transaction may stay open across broker restarts here: longer than librdkafka's 60 s
    producer = ck.producer(
        bootstrap, **{"transactional.id": txn_id, "transaction.timeout.ms": 300_000}
    )
    producer.init_transactions(TIMEOUT)
    return producer


def send(producer: Producer, topic: str, *values: str) -> None:
    """Produce `values` and wait until they are written, so offsets follow the test's order."""
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0


def read(bootstrap: str, topic: str, isolation: str, until: int | None = None) -> list[str]:
    """Every value a consumer with `isolation` reads from offset 0 until it is caught up (its
    position reaches the partition's last stable offset / high watermark), or `until` values."""
    consumer: Consumer = ck.consumer(bootstrap, **{"isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[str] = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if until is not None:
                    if len(values) >= until:
                        break
                    continue
                [position] = consumer.position([TopicPartition(topic, 0)])
                # ListOffsets latest at the consumer's isolation level: the LSO for read_committed
                _, end = consumer.get_watermark_offsets(
                    TopicPartition(topic, 0), timeout=TIMEOUT, cached=False
                )
                if position.offset >= 0 and position.offset >= end:
                    break
                continue
            if msg.error():
                raise KafkaException(msg.error())
            value = msg.value()
            assert value is not None
            values.append(value.decode())
        return values
    finally:
        consumer.close()


def write_interleaved(
    bootstrap: str, topic: str, marked: Callable[[int], None] = lambda _end: None
) -> tuple[list[str], list[str], Producer]:
    """The interleaving of the module docstring; (what read_committed must read, everything
    written, the producer whose transaction is left open). `marked(end)` runs after each commit
    or abort with the log end its marker makes (a broker may write markers after answering
    EndTxn, as Kafka does; a caller that needs the order exact waits for it)."""
    plain = ck.producer(bootstrap)
    a = txn_producer(bootstrap, f"{topic}-a")
    b = txn_producer(bootstrap, f"{topic}-b")
    written = [0]

    def put(producer: Producer, *values: str) -> None:
        send(producer, topic, *values)
        written[0] += len(values)

    def end(producer: Producer, commit: bool) -> None:
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
        written[0] += 1
        marked(written[0])

    put(plain, "p0")
    a.begin_transaction()
    put(a, *[f"a-aborted-{i}" for i in range(5)])
    b.begin_transaction()
    put(b, *[f"b-committed-{i}" for i in range(5)])
    put(plain, "p1")
    end(a, commit=False)
    put(b, "b-committed-5")
    end(b, commit=True)
    a.begin_transaction()
    put(a, *[f"a-committed-{i}" for i in range(5)])
    end(a, commit=True)
    b.begin_transaction()
    put(b, *[f"b-aborted-{i}" for i in range(4)])
    put(plain, "p2")
    end(b, commit=False)
    a.begin_transaction()
    put(a, "a-open-0")
    put(plain, "p3")
    committed = (
        ["p0"] + [f"b-committed-{i}" for i in range(5)] + ["p1", "b-committed-5"]
        + [f"a-committed-{i}" for i in range(5)] + ["p2"]
    )  # fmt: skip
    everything = (
        ["p0"] + [f"a-aborted-{i}" for i in range(5)] + [f"b-committed-{i}" for i in range(5)]
        + ["p1", "b-committed-5"] + [f"a-committed-{i}" for i in range(5)]
        + [f"b-aborted-{i}" for i in range(4)] + ["p2", "a-open-0", "p3"]
    )  # fmt: skip
    return committed, everything, a


def test_read_committed_skips_aborted_and_stops_at_the_open_transaction(
    strom_broker: BrokerProcess,
) -> None:
    bootstrap = strom_broker.bootstrap
    topic = topic_name("rc")
    ck.create_topic(ck.admin(bootstrap), topic, 1, SMALL_SEGMENTS)
    committed, everything, open_producer = write_interleaved(bootstrap, topic)
    assert read(bootstrap, topic, "read_committed") == committed
    assert read(bootstrap, topic, "read_uncommitted") == everything

    strom_broker.restart(clean=True)
    assert read(bootstrap, topic, "read_committed") == committed
    strom_broker.kill()
    strom_broker.restart(clean=False)
    assert read(bootstrap, topic, "read_committed") == committed

    # the open transaction's producer lost its broker twice: it commits once it reconnects
    open_producer.commit_transaction(TIMEOUT)
    assert read(bootstrap, topic, "read_committed") == [*committed, "a-open-0", "p3"]


def test_a_read_committed_consumer_waits_at_an_open_transaction(
    strom_broker: BrokerProcess,
) -> None:
    bootstrap = strom_broker.bootstrap
    topic = topic_name("rc-wait")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    plain = ck.producer(bootstrap)
    producer = txn_producer(bootstrap, f"{topic}-tx")
    send(plain, topic, "before")
    producer.begin_transaction()
    send(producer, topic, "inside-0", "inside-1")
    send(plain, topic, "after")

    consumer: Consumer = ck.consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = poll_values(consumer, lambda seen: "after" in seen, seconds=3.0)
        assert got == ["before"]  # nothing at or past the open transaction's first offset
        producer.commit_transaction(TIMEOUT)
        got += poll_values(consumer, lambda seen: "after" in seen, seconds=TIMEOUT)
        assert got == ["before", "inside-0", "inside-1", "after"]
    finally:
        consumer.close()


def poll_values(consumer: Consumer, done: Callable[[list[str]], bool], seconds: float) -> list[str]:
    """Values polled for up to `seconds`, or until `done` says enough."""
    out: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done(out):
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        error = msg.error()
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            raise KafkaException(error)
        value = msg.value()
        if error is None and value is not None:
            out.append(value.decode())
    return out
