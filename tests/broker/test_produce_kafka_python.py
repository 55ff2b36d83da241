"""kafka-python's real KafkaProducer and KafkaConsumer (assign + seek, no group) end to end.

kafka-python is synchronous, so the in-process broker runs in its own trio run
on a helper thread, and the test drives the clients from the main thread.
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from strom.broker.testing.embedded import open_broker

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

TIMEOUT_S = 20


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    """An in-process broker served from a background thread."""
    ready: queue.Queue[str | BaseException] = queue.Queue()
    stop: list[trio.Event] = []
    token: list[trio.lowlevel.TrioToken] = []

    async def serve() -> None:
        stop.append(trio.Event())
        token.append(trio.lowlevel.current_trio_token())
        async with open_broker(tmp_path / "data", {"num.partitions": "2"}) as broker:
            ready.put(broker.bootstrap)
            await stop[0].wait()

    def run() -> None:
        try:
            trio.run(serve)
        except BaseException as exc:  # report start-up failures to the test
            ready.put(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started = ready.get(timeout=TIMEOUT_S)
    if isinstance(started, BaseException):
        raise started
    try:
        yield started
    finally:
        trio.from_thread.run_sync(stop[0].set, trio_token=token[0])
        thread.join(TIMEOUT_S)


def _producer(bootstrap: str, **config: Any) -> Any:
    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **config)


def _consume(bootstrap: str, topic: str, partition: int, offset: int, count: int) -> list[Any]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=200
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        got: list[Any] = []
        for _ in range(50):
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
            if len(got) >= count:
                break
        assert consumer.end_offsets([tp])[tp] >= count
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_then_consume(bootstrap: str, compression: str | None) -> None:
    producer = _producer(bootstrap, compression_type=compression)
    try:
        futures = [
            producer.send("kp", key=b"k%d" % i, value=b"value-%d" % i, partition=0)
            for i in range(50)
        ]
        producer.flush(TIMEOUT_S)
        offsets = [f.get(TIMEOUT_S).offset for f in futures]
    finally:
        producer.close(TIMEOUT_S)
    assert offsets == list(range(50))
    records = _consume(bootstrap, "kp", 0, 10, 40)
    assert [(r.offset, r.value) for r in records] == [(i, b"value-%d" % i) for i in range(10, 50)]


def test_idempotent_producer(bootstrap: str) -> None:
    producer = _producer(bootstrap, enable_idempotence=True)
    try:
        for i in range(20):
            producer.send("idem", value=b"%d" % i, partition=1)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    records = _consume(bootstrap, "idem", 1, 0, 20)
    assert [r.value for r in records] == [b"%d" % i for i in range(20)]


def test_offsets_for_times_and_beginning(bootstrap: str) -> None:
    producer = _producer(bootstrap)
    try:
        for i in range(5):
            producer.send("times", value=b"%d" % i, partition=0, timestamp_ms=1_000_000 + i * 10)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tp = TopicPartition("times", 0)
        found = consumer.offsets_for_times({tp: 1_000_015})[tp]
        assert (found.offset, found.timestamp) == (2, 1_000_020)
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == 5
    finally:
        consumer.close()
