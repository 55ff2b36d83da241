"""kafka-python's transactional producer against a `strom serve` process: commit, abort,
send_offsets_to_transaction, read_committed consumption, and a fenced zombie."""

from __future__ import annotations

import time
import warnings

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions

from compat_tests.confluent_kafka import ck
from compat_tests.kafka_python.kp import KafkaConsumer, KafkaProducer, TopicPartition

with warnings.catch_warnings():  # kafka-python's schema loading warns (see kp.py)
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

from compat_tests.helpers import topic_name
from strom.broker.testing.embedded import BrokerProcess

TIMEOUT = 30.0


def txn_producer(bootstrap: str, txn_id: str) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    producer.init_transactions()
    return producer


def read_committed(bootstrap: str, topic: str, group: str | None = None) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=group,
        consumer_timeout_ms=3000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        return [m.value for m in consumer]
    finally:
        consumer.close()


def test_commit_abort_and_offsets(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("kp-txn")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    producer = txn_producer(bootstrap, f"{topic}-tx")
    producer.begin_transaction()
    for i in range(3):
        producer.send(topic, f"c{i}".encode(), partition=0)
    producer.send_offsets_to_transaction(
        {TopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)}, f"{topic}-group"
    )
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"aborted", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert read_committed(bootstrap, topic) == [b"c0", b"c1", b"c2"]

    admin = ck.admin(bootstrap)
    offsets = ck.result(
        admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(f"{topic}-group")])[
            f"{topic}-group"
        ]
    )
    [tp] = [tp for tp in offsets.topic_partitions if tp.topic == topic]
    assert tp.offset == 7


def test_zombie_is_fenced(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("kp-zombie")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    zombie = txn_producer(bootstrap, f"{topic}-tx")
    zombie.begin_transaction()
    zombie.send(topic, b"zombie", partition=0)
    zombie.flush()
    successor = txn_producer(bootstrap, f"{topic}-tx")
    successor.begin_transaction()
    successor.send(topic, b"successor", partition=0)
    successor.commit_transaction()
    successor.close()
    with pytest.raises(KafkaError):
        zombie.commit_transaction()
    zombie.close(timeout=1)
    deadline = time.monotonic() + TIMEOUT
    while read_committed(bootstrap, topic) != [b"successor"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert read_committed(bootstrap, topic) == [b"successor"]
