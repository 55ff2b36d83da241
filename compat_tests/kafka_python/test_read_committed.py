"""kafka-python's consumer with isolation_level=read_committed against a `strom serve` process.

The data is the interleaving of compat_tests/confluent_kafka/test_read_committed.py (two
transactional producers, commits, aborts, plain records, transactions spanning small
segments, one transaction left open): kafka-python's consumer reads exactly the plain and
committed records in offset order and stops at the open transaction; its end offset for
read_committed is the last stable offset; read_uncommitted reads everything.
"""

from __future__ import annotations

from typing import Any

from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.test_read_committed import (
    SMALL_SEGMENTS,
    TIMEOUT,
    write_interleaved,
)
from compat_tests.helpers import Deadline, topic_name
from compat_tests.kafka_python import kp
from strom.broker.testing.embedded import BrokerProcess


def read(bootstrap: str, topic: str, isolation: str) -> tuple[list[str], int]:
    """(values read from offset 0 up to the consumer's end offset, that end offset)."""
    with kp.consumer(bootstrap, isolation_level=isolation) as consumer:
        tp = kp.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        values: list[str] = []
        deadline = Deadline(TIMEOUT)
        while consumer.position(tp) < end:
            if deadline.expired:
                raise AssertionError(f"at {consumer.position(tp)} of {end} after {TIMEOUT}s")
            batches: dict[Any, list[Any]] = consumer.poll(timeout_ms=200)
            for records in batches.values():
                values += [r.value.decode() for r in records]
        return values, int(end)


def test_read_committed(strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = topic_name("kp-rc")
    ck.create_topic(ck.admin(bootstrap), topic, 1, SMALL_SEGMENTS)
    committed, everything, open_producer = write_interleaved(bootstrap, topic)
    values, lso = read(bootstrap, topic, "read_committed")
    assert values == committed
    high = read(bootstrap, topic, "read_uncommitted")
    assert high[0] == everything
    assert lso < high[1]  # the open transaction holds the end a read_committed consumer sees
    open_producer.commit_transaction(TIMEOUT)
    values, lso = read(bootstrap, topic, "read_committed")
    assert values == [*committed, "a-open-0", "p3"]
    assert lso == high[1] + 1  # past the commit marker
