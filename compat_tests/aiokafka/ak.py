"""aiokafka plumbing for the compatibility tests.

aiokafka runs on asyncio; each test is a plain function that runs its coroutine with
`asyncio.run` (the rest of the suite is trio, so no asyncio pytest plugin is involved).
Consumers are assign-only (`group_id=None`): no coordinator. Clients are always stopped, so no
unclosed-transport warning (an error in this suite) escapes a test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiokafka.errors as errors
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from compat_tests.helpers import Deadline, Header, Rec

__all__ = [
    "ConfigResource",
    "ConfigResourceType",
    "NewPartitions",
    "NewTopic",
    "RecordsToDelete",
    "TopicPartition",
    "errors",
]

TIMEOUT = 20.0
TIMEOUT_MS = int(TIMEOUT * 1000)


def run(test: Callable[[], Awaitable[None]]) -> None:
    """Run one test coroutine on a fresh asyncio loop, bounded by a deadline."""

    async def bounded() -> None:
        await asyncio.wait_for(test(), timeout=120)

    asyncio.run(bounded())


@asynccontextmanager
async def admin(bootstrap: str) -> AsyncIterator[Any]:
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def producer(bootstrap: str, **config: Any) -> AsyncIterator[Any]:
    client = AIOKafkaProducer(
        bootstrap_servers=bootstrap, **{"acks": "all", "linger_ms": 5, **config}
    )
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


@asynccontextmanager
async def consumer(bootstrap: str, **config: Any) -> AsyncIterator[Any]:
    client = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        **{
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "none",
            "request_timeout_ms": TIMEOUT_MS,
            **config,
        },
    )
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


async def wait_until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll an observable condition until it holds; fail at the deadline."""
    deadline = Deadline(TIMEOUT)
    while not await check():
        if deadline.expired:
            raise AssertionError(f"timed out after {TIMEOUT}s waiting for {what}")
        await asyncio.sleep(0.05)


async def create_topic(
    client: Any, name: str, partitions: int, configs: Mapping[str, str] | None = None
) -> None:
    new = NewTopic(name, partitions, 1, topic_configs=dict(configs or {}))
    response = await client.create_topics([new], timeout_ms=TIMEOUT_MS)
    assert topic_errors(response) == {name: 0}


def topic_errors(response: Any) -> dict[str, int]:
    """{topic: error code} from a CreateTopics or DeleteTopics response."""
    obj = response.to_object()
    entries = obj["topic_errors"] if "topic_errors" in obj else obj["topic_error_codes"]
    return {entry["topic"]: entry["error_code"] for entry in entries}


def resource_errors(responses: Iterable[Any]) -> dict[str, int]:
    """{resource name: error code} from AlterConfigs responses."""
    return {
        r["resource_name"]: r["error_code"]
        for resp in responses
        for r in resp.to_object()["resources"]
    }


async def describe_configs(client: Any, resource: ConfigResource) -> dict[str, dict[str, Any]]:
    """{config name: entry} of one resource, every config (no filter)."""
    [response] = await client.describe_configs([resource])
    [described] = response.to_object()["resources"]
    assert described["error_code"] == 0, described
    return {entry["config_names"]: entry for entry in described["config_entries"]}


async def produce_all(client: Any, topic: str, records: Iterable[Rec]) -> list[tuple[int, int]]:
    """Send every record to its partition; return (partition, offset) of each, in send order."""
    futures = [
        await client.send(
            topic,
            value=rec.value,
            key=rec.key,
            partition=rec.partition,
            timestamp_ms=rec.timestamp,
            headers=list(rec.headers),
        )
        for rec in records
    ]
    await client.flush()
    metas = await asyncio.wait_for(asyncio.gather(*futures), timeout=TIMEOUT)
    return [(m.partition, m.offset) for m in metas]


def to_rec(record: Any) -> Rec:
    assert record.timestamp_type == 0, record  # CreateTime
    headers: tuple[Header, ...] = tuple((k, v) for k, v in record.headers)
    return Rec(record.partition, record.offset, record.key, record.value, headers, record.timestamp)


async def consume(client: Any, count: int, within: float = TIMEOUT) -> list[Rec]:
    """Exactly `count` records from the current assignment, in the order getmany() gave them."""
    out: list[Rec] = []
    deadline = Deadline(within)
    while len(out) < count:
        if deadline.expired:
            raise AssertionError(f"consumed {len(out)} of {count} records within {within}s")
        batches = await client.getmany(timeout_ms=200, max_records=count - len(out))
        for records in batches.values():
            out.extend(to_rec(r) for r in records)
    return out


async def read_from_start(bootstrap: str, topic: str, partitions: int, count: int) -> list[Rec]:
    """Exactly `count` records from the beginning of the topic's first `partitions` partitions,
    read by assign + seek_to_beginning on a fresh consumer."""
    async with consumer(bootstrap) as client:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        client.assign(assigned)
        await client.seek_to_beginning(*assigned)
        return await consume(client, count)
