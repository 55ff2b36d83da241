"""The Java consumer (kafka-clients 3.9 and 4.x) with isolation.level=read_committed.

The data is the interleaving of compat_tests/confluent_kafka/test_read_committed.py (two
transactional producers, commits, aborts, plain records, transactions spanning small
segments, one transaction left open). The Java consumer's end offset for read_committed is the
last stable offset; reading to it (assign, seekToBeginning, poll) it gets exactly the plain and
committed records, in offset order: the aborted ones are skipped through the fetch's aborted
transactions. A read_uncommitted one reads everything.
"""

from __future__ import annotations

import hashlib

from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.test_read_committed import (
    SMALL_SEGMENTS,
    TIMEOUT,
    write_interleaved,
)
from compat_tests.helpers import topic_name
from compat_tests.java.harness import JavaHarness
from strom.broker.testing.embedded import BrokerProcess


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def test_read_committed(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = topic_name("java-rc")
    ck.create_topic(ck.admin(bootstrap), topic, 1, SMALL_SEGMENTS)
    committed, everything, open_producer = write_interleaved(bootstrap, topic)

    def read(isolation: str) -> tuple[list[str], int]:
        events = java_harness.run(
            strom_broker, "produce-consume", topic=topic, partitions=1, mode="consume",
            isolation=isolation,
        )  # fmt: skip
        end = events.one("offsets")["end"]["0"]
        return [e["record"]["value_sha"] for e in events.of("received")], end

    values, lso = read("read_committed")
    assert values == [sha(v) for v in committed]
    values, high = read("read_uncommitted")
    assert values == [sha(v) for v in everything]
    assert lso < high
    open_producer.commit_transaction(TIMEOUT)
    values, lso = read("read_committed")
    assert values == [sha(v) for v in [*committed, "a-open-0", "p3"]]
    assert lso == high + 1  # past the commit marker
