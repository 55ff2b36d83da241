"""kafka-python plumbing for the compatibility tests.

kafka-python reads its protocol schemas through a deprecated importlib API on import, and the
suite turns warnings into errors, so every kafka.* import goes through this module (as
tests/wire/kp_helpers.py does). Consumers are assign-only (`group_id=None`): no coordinator.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as errors
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, OffsetSpec

from compat_tests.helpers import Deadline, Header, Rec

__all__ = [
    "AlterConfigOp",
    "ConfigResource",
    "ConfigResourceType",
    "KafkaAdminClient",
    "KafkaConsumer",
    "KafkaProducer",
    "OffsetSpec",
    "TopicPartition",
    "errors",
]

TIMEOUT = 20.0
TIMEOUT_MS = int(TIMEOUT * 1000)


@contextmanager
def admin(bootstrap: str) -> Iterator[Any]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        yield client
    finally:
        client.close()


@contextmanager
def producer(bootstrap: str, **config: Any) -> Iterator[Any]:
    client = KafkaProducer(bootstrap_servers=bootstrap, **{"acks": "all", "linger_ms": 5, **config})
    try:
        yield client
    finally:
        client.close(timeout=TIMEOUT)


@contextmanager
def consumer(bootstrap: str, **config: Any) -> Iterator[Any]:
    client = KafkaConsumer(
        bootstrap_servers=bootstrap,
        **{
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "none",
            "request_timeout_ms": TIMEOUT_MS,
            **config,
        },
    )
    try:
        yield client
    finally:
        client.close()


def create_topic(
    client: Any, name: str, partitions: int, configs: Mapping[str, str] | None = None
) -> None:
    spec: dict[str, Any] = {"num_partitions": partitions, "replication_factor": 1}
    if configs:
        spec["configs"] = dict(configs)
    client.create_topics({name: spec}, timeout_ms=TIMEOUT_MS)


def produce_all(client: Any, topic: str, records: Iterable[Rec]) -> list[tuple[int, int]]:
    """Send every record to its partition; return (partition, offset) of each, in send order."""
    futures = [
        client.send(
            topic,
            value=rec.value,
            key=rec.key,
            headers=list(rec.headers),
            partition=rec.partition,
            timestamp_ms=rec.timestamp,
        )
        for rec in records
    ]
    client.flush(timeout=TIMEOUT)
    acked = []
    for future in futures:
        meta = future.get(timeout=TIMEOUT)
        acked.append((meta.partition, meta.offset))
    return acked


def to_rec(record: Any) -> Rec:
    assert record.timestamp_type == 0, record  # CreateTime
    headers: tuple[Header, ...] = tuple((k, v) for k, v in record.headers)
    return Rec(record.partition, record.offset, record.key, record.value, headers, record.timestamp)


def consume(client: Any, count: int, timeout: float = TIMEOUT) -> list[Rec]:
    """Exactly `count` records from the current assignment, in the order poll() returned them."""
    out: list[Rec] = []
    deadline = Deadline(timeout)
    while len(out) < count:
        if deadline.expired:
            raise AssertionError(f"consumed {len(out)} of {count} records within {timeout}s")
        batches = client.poll(timeout_ms=200, max_records=count - len(out))
        for records in batches.values():
            out.extend(to_rec(r) for r in records)
    return out
