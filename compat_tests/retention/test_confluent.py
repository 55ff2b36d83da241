"""confluent-kafka (librdkafka) against retention, compaction and per-topic storage configs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaError, Message, Producer, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Deadline, now_ms, stored_codecs, topic_name, wait_until
from strom.broker.testing.embedded import BrokerProcess


def cleaned_through(broker: BrokerProcess, topic: str, offset: int) -> bool:
    """Whether the cleaner's checkpoint says partition 0 of `topic` is clean below `offset`."""
    path = Path(broker.data_dir) / "cleaner-offset-checkpoint"
    if not path.exists():
        return False
    for line in path.read_text().splitlines()[2:]:
        name, partition, clean = line.split()
        if name == topic and partition == "0":
            return int(clean) >= offset
    return False


def produce(
    producer: Producer,
    topic: str,
    items: Sequence[tuple[bytes | None, bytes | None, int | None]],
    flush_timeout: float = ck.TIMEOUT,
) -> list[Message]:
    """Produce (key, value, timestamp) records to partition 0, failing on any error; the
    delivered messages."""
    delivered: list[Message] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg)

    for key, value, ts in items:
        if ts is None:
            producer.produce(topic, value=value, key=key, partition=0, on_delivery=report)
        else:
            producer.produce(
                topic, value=value, key=key, partition=0, on_delivery=report, timestamp=ts
            )
    assert producer.flush(flush_timeout) == 0
    assert not errors, errors[:3]
    return delivered


def read_all(bootstrap: str, topic: str, end: int) -> list[Message]:
    consumer = ck.consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Message] = []
        deadline = Deadline(ck.TIMEOUT)
        while not out or (out[-1].offset() or 0) < end - 1:
            assert not deadline.expired, f"read up to {out[-1].offset() if out else None} of {end}"
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append(msg)
        return out
    finally:
        consumer.close()


def test_recompression_and_log_append_time(cleaning_broker: BrokerProcess) -> None:
    admin = ck.admin(cleaning_broker.bootstrap)
    topic = topic_name("zstd-lat")
    ck.create_topic(
        admin, topic, 1, {"compression.type": "zstd", "message.timestamp.type": "LogAppendTime"}
    )
    started = now_ms()
    producer = ck.producer(cleaning_broker.bootstrap, **{"compression.type": "gzip"})
    sent = [(b"k%d" % i, b"strom " * 50 + b"%d" % i, started - 3_600_000) for i in range(50)]
    delivered = produce(producer, topic, sent)
    for msg in delivered:
        ts_type, ts = msg.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        assert ts >= started
    received = read_all(cleaning_broker.bootstrap, topic, 50)
    assert [(m.key(), m.value()) for m in received] == [(k, v) for k, v, _ in sent]
    for msg in received:
        ts_type, ts = msg.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        assert started <= ts <= now_ms()
    assert stored_codecs(Path(cleaning_broker.data_dir), topic) == {"zstd"}
    # Changed live to uncompressed: later batches are stored without compression.
    resource = ck.ConfigResource(ck.ResourceType.TOPIC, topic)
    entry = ck.ConfigEntry(
        "compression.type", "uncompressed", incremental_operation=ck.AlterConfigOpType.SET
    )
    resource.add_incremental_config(entry)
    altered = admin.incremental_alter_configs([resource], request_timeout=ck.TIMEOUT)
    assert ck.result(altered[resource]) is None
    produce(producer, topic, [(b"after", b"x" * 500, None)])
    assert stored_codecs(Path(cleaning_broker.data_dir), topic) == {"zstd", "none"}


def test_compacted_topic_read_from_the_start(cleaning_broker: BrokerProcess) -> None:
    admin = ck.admin(cleaning_broker.bootstrap)
    topic = topic_name("compacted")
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01",
    }
    ck.create_topic(admin, topic, 1, configs)
    futures = admin.describe_configs(
        [ck.ConfigResource(ck.ResourceType.TOPIC, topic)], request_timeout=ck.TIMEOUT
    )
    [(_, future)] = futures.items()  # keep `futures` alive: its futures are completed through it
    assert ck.result(future)["cleanup.policy"].value == "compact"
    producer = ck.producer(cleaning_broker.bootstrap, **{"linger.ms": 0})
    items = [
        (b"user-%d" % (i % 6), None if i % 29 == 7 else b"state-%d" % i, None) for i in range(240)
    ]
    newest: dict[bytes, tuple[int, bytes | None]] = {}
    for i, item in enumerate(items):
        [msg] = produce(producer, topic, [item])
        assert msg.offset() == i
        newest[item[0] or b""] = (i, item[1])
    wait_until(lambda: cleaned_through(cleaning_broker, topic, 120), timeout=30, what="cleaning")
    received = read_all(cleaning_broker.bootstrap, topic, 240)
    offsets = [m.offset() or 0 for m in received]
    assert offsets == sorted(set(offsets))
    assert len(received) < 240
    for msg in received:
        position = msg.offset()
        assert position is not None
        assert (msg.key(), msg.value()) == items[position][:2]
    seen = {(m.offset(), m.key(), m.value()) for m in received}
    for key, (offset, value) in newest.items():
        if value is not None:
            assert (offset, key, value) in seen

    # A record without a key is refused with INVALID_RECORD.
    failures: list[KafkaError | None] = []
    producer.produce(
        topic, value=b"no key", partition=0, on_delivery=lambda err, _m: failures.append(err)
    )
    producer.flush(ck.TIMEOUT)
    assert [f.code() if f else None for f in failures] == [KafkaError.INVALID_RECORD]


def test_a_consumer_behind_retention_resets(cleaning_broker: BrokerProcess) -> None:
    admin = ck.admin(cleaning_broker.bootstrap)
    topic = topic_name("retained")
    ck.create_topic(admin, topic, 1, {"retention.ms": "60000", "segment.bytes": "1024"})
    producer = ck.producer(cleaning_broker.bootstrap, **{"linger.ms": 0})
    old = now_ms() - 600_000
    for i in range(40):  # ten minutes old: past retention.ms, in sealed segments
        produce(producer, topic, [(b"k", b"old-%02d" % i + b"." * 60, old + i)])
    for i in range(5):
        produce(producer, topic, [(b"k", b"new-%d" % i, None)])
    probe = ck.consumer(cleaning_broker.bootstrap)
    seen: list[int] = []

    def settled() -> int | None:
        """The log start once retention has removed every old-only segment (checks run every
        100 ms, possibly while the old records were still going in)."""
        seen.append(ck.watermarks(probe, topic, 0)[0])
        time.sleep(0.3)
        last = ck.watermarks(probe, topic, 0)[0]
        return last if last > 0 and last == seen[-1] else None

    try:
        low = wait_until(settled, timeout=30, what="retention to delete the old segments")
    finally:
        probe.close()
    assert low <= 40
    # auto.offset.reset=earliest: a position below the log start moves to it.
    consumer = ck.consumer(cleaning_broker.bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first: Message | None = None
        deadline = Deadline(ck.TIMEOUT)
        while first is None and not deadline.expired:
            for msg in consumer.consume(num_messages=1, timeout=0.2):
                assert msg.error() is None, msg.error()
                first = msg
        assert first is not None
        assert first.offset() == low
    finally:
        consumer.close()
    # auto.offset.reset=error: the consumer is told its offset is out of range.
    strict = ck.consumer(cleaning_broker.bootstrap)
    try:
        strict.assign([TopicPartition(topic, 0, 0)])
        error: KafkaError | None = None
        deadline = Deadline(ck.TIMEOUT)
        while error is None and not deadline.expired:
            for msg in strict.consume(num_messages=1, timeout=0.2):
                error = msg.error()
                assert error is not None, f"read offset {msg.offset()} below the log start"
        assert error is not None
        assert error.code() == KafkaError._AUTO_OFFSET_RESET
    finally:
        strict.close()
