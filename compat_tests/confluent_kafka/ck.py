"""confluent-kafka (librdkafka) plumbing for the compatibility tests.

Consumers are assign-only: librdkafka insists on a `group.id`, but without subscribe() and
with auto commit off the group coordinator is never needed (consumer groups are not part of
these tests). `auto.offset.reset=error` makes an out-of-range position fail loudly instead of
silently jumping.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

# The admin module's documented names, which its stubs do not re-export explicitly.
from confluent_kafka.admin import (  # type: ignore[attr-defined,unused-ignore]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from compat_tests.helpers import Deadline, Header, Rec

__all__ = [
    "AlterConfigOpType",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "NewPartitions",
    "NewTopic",
    "ResourceType",
    "offset_spec",
]

TIMEOUT = 20.0
"""Seconds any single client operation may take before the test fails."""

QUIET: dict[str, Any] = {"log_level": 4}
"""librdkafka logs disconnects at info level (a broker shutting down); keep warnings and up."""


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def producer(bootstrap: str, **config: Any) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET, **config}
    )


def consumer(bootstrap: str, **config: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-assign-only",  # required by the client; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            **QUIET,
            **config,
        }
    )


def result(future: concurrent.futures.Future[Any]) -> Any:
    return future.result(timeout=TIMEOUT)


def create_topic(
    client: AdminClient, name: str, partitions: int, config: Mapping[str, str] | None = None
) -> None:
    new = NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))
    futures = client.create_topics([new], operation_timeout=TIMEOUT, request_timeout=TIMEOUT)
    assert result(futures[name]) is None


@contextmanager
def fatal_unmasked() -> Iterator[None]:
    """Raise a producer's fatal error as the KafkaException it is.

    confluent-kafka 2.16's error callback raises a fatal error as a KafkaException but leaves it
    pending while the same poll, flush or transactional call goes on serving delivery reports.
    The next report's first call into C then fails with a SystemError whose cause is that
    KafkaException; this unwraps it, so callers handle one kind of fatal error.
    """
    try:
        yield
    except SystemError as exc:
        if isinstance(exc.__cause__, KafkaException):
            raise exc.__cause__ from None
        raise


def error_code(exc: BaseException) -> int:
    """The Kafka error code carried by a confluent-kafka exception."""
    assert isinstance(exc, KafkaException), repr(exc)
    error = exc.args[0]
    assert isinstance(error, KafkaError), repr(exc.args)
    return int(error.code())


def produce_all(client: Producer, topic: str, records: Iterable[Rec]) -> list[tuple[int, int]]:
    """Produce every record to its partition; return (partition, offset) of each acknowledgement.

    Acknowledgements are returned in the order the producer reported them.
    """
    acked: list[tuple[int, int]] = []
    failed: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None
            assert offset is not None
            acked.append((partition, offset))

    count = 0
    for rec in records:
        count += 1
        while True:
            try:
                client.produce(
                    topic,
                    value=rec.value,
                    key=rec.key,
                    partition=rec.partition,
                    timestamp=rec.timestamp,
                    headers=list(rec.headers) or None,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                client.poll(0.1)
    remaining = client.flush(TIMEOUT)
    assert remaining == 0, f"{remaining} records not acknowledged within {TIMEOUT}s"
    assert not failed, f"delivery failures: {failed[:5]}"
    assert len(acked) == count
    return acked


def to_rec(msg: Message) -> Rec:
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None
    assert offset is not None
    ts_type, ts = msg.timestamp()
    assert ts_type == TIMESTAMP_CREATE_TIME, (ts_type, ts)
    headers: tuple[Header, ...] = ()
    raw = msg.headers()
    if raw:
        assert isinstance(raw, list)
        headers = tuple((k, v if v is None else bytes(v)) for k, v in raw)  # type: ignore[arg-type,unused-ignore]
    return Rec(partition, offset, msg.key(), msg.value(), headers, ts)


def consume(client: Consumer, count: int, timeout: float = TIMEOUT) -> list[Rec]:
    """Exactly `count` records from the current assignment, failing on any consumer error."""
    out: list[Rec] = []
    deadline = Deadline(timeout)
    while len(out) < count:
        if deadline.expired:
            raise AssertionError(f"consumed {len(out)} of {count} records within {timeout}s")
        for msg in client.consume(num_messages=min(10_000, count - len(out)), timeout=0.2):
            err = msg.error()
            if err is not None:
                raise AssertionError(f"consumer error: {err}")
            out.append(to_rec(msg))
    return out


def watermarks(client: Consumer, topic: str, partition: int) -> tuple[int, int]:
    low, high = client.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=TIMEOUT, cached=False
    )
    return low, high


def offset_spec(kind: str, timestamp: int = 0) -> Any:
    """An admin ListOffsets spec: earliest, latest, max_timestamp or for_timestamp."""
    if kind == "for_timestamp":
        return OffsetSpec.for_timestamp(timestamp)
    return getattr(OffsetSpec, kind)()
