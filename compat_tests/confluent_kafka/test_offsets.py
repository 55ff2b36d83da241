"""confluent-kafka: offsets for times (Consumer.offsets_for_times, AdminClient.list_offsets)."""

from __future__ import annotations

from confluent_kafka import OFFSET_END, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import now_ms, sample_records, topic_name
from strom.broker.testing.embedded import BrokerProcess

COUNT = 40
STEP = 1000


def test_offsets_for_times_and_watermarks(shared_broker: BrokerProcess) -> None:
    topic = topic_name("ck-times")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 2)
    base = now_ms() - 600_000
    records = sample_records(2, COUNT, base_ts=base, ts_step=STEP)
    ck.produce_all(
        ck.producer(shared_broker.bootstrap, **{"compression.type": "lz4"}), topic, records
    )

    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        cases = {
            base - 5_000: 0,  # before the first record: the first offset
            base: 0,  # exactly the first timestamp
            base + 1: 1,  # between two records: the next one
            base + 2_500: 3,
            base + 17 * STEP: 17,
            base + (COUNT - 1) * STEP: COUNT - 1,  # the last record
            base + COUNT * STEP: OFFSET_END,  # after the last record: none (-1)
        }
        for ts, offset in cases.items():
            found = consumer.offsets_for_times(
                [TopicPartition(topic, 0, ts), TopicPartition(topic, 1, ts)], timeout=ck.TIMEOUT
            )
            assert [(tp.partition, tp.offset, tp.error) for tp in found] == [
                (0, offset, None),
                (1, offset, None),
            ], ts
        assert ck.watermarks(consumer, topic, 0) == (0, COUNT)
        assert ck.watermarks(consumer, topic, 1) == (0, COUNT)
    finally:
        consumer.close()


def test_admin_list_offsets(shared_broker: BrokerProcess) -> None:
    topic = topic_name("ck-list-offsets")
    admin = ck.admin(shared_broker.bootstrap)
    ck.create_topic(admin, topic, 1)
    base = now_ms() - 600_000
    ck.produce_all(
        ck.producer(shared_broker.bootstrap),
        topic,
        sample_records(1, COUNT, base_ts=base, ts_step=STEP),
    )
    tp = TopicPartition(topic, 0)
    specs = {
        "earliest": (ck.offset_spec("earliest"), 0),
        "latest": (ck.offset_spec("latest"), COUNT),
        "max_timestamp": (ck.offset_spec("max_timestamp"), COUNT - 1),
        "for_timestamp": (ck.offset_spec("for_timestamp", base + 7 * STEP - 1), 7),
    }
    for name, (spec, offset) in specs.items():
        futures = admin.list_offsets({tp: spec}, request_timeout=ck.TIMEOUT)
        info = ck.result(futures[tp])
        assert info.offset == offset, name
        if name in ("max_timestamp", "for_timestamp"):
            assert info.timestamp == base + offset * STEP, name
