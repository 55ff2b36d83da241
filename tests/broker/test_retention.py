"""Retention in a running broker: the maintenance loop, broker defaults and per-topic overrides,
consumers that fall behind, and DeleteRecords as readers see it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.config import load_config
from strom.storage import LogConfig, PartitionLog
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.records import decode_batch, iter_batches
from tests.broker.test_describe_configs import describe_one
from tests.broker.test_produce_helpers import (
    alter_topic_config,
    batch,
    create_topic,
    fetch_one,
    produce,
    state_of,
    wait_for,
)

pytestmark = pytest.mark.trio

FAST_CHECKS = {"log.retention.check.interval.ms": "20"}
TOPIC = 2


def log_of(broker: EmbeddedBroker, topic: str) -> PartitionLog:
    found = state_of(broker).logs.get(topic, 0)
    assert found is not None
    return found


def offsets_of(data: bytes | bytearray | memoryview | None) -> list[int]:
    out: list[int] = []
    for header, view in iter_batches(memoryview(bytes(data or b""))):
        out.extend(r.offset for r in decode_batch(view, header)[1])
    return out


async def earliest(client: KafkaClient, topic: str) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(0, -1, -2)]
            )
        ],
    )
    response = await client.request(request, 7, ListOffsetsResponse)
    return response.topics[0].partitions[0].offset


async def test_time_retention_runs_on_the_check_interval(tmp_path: Path) -> None:
    async with open_broker(tmp_path / "data", FAST_CHECKS) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            await create_topic(
                broker, "r", configs={"retention.ms": "60000", "segment.bytes": "500"}
            )
            old = int(time.time() * 1000) - 120_000
            for i in range(20):  # two minutes old: past retention.ms
                await produce(client, "r", batch([b"old-%d" % i], ts=old + i))
            for i in range(5):
                await produce(client, "r", batch([b"new-%d" % i]))
            log = log_of(broker, "r")
            # Retention may already be at work while the old records go in; wait until every
            # segment holding only old records is gone.
            await wait_for(
                lambda: all(s.max_timestamp > old + 19 for s in log.segments), "retention to run"
            )
            start = log.log_start_offset
            assert 0 < start == log.segments[0].base_offset <= 20
            # A consumer that fell behind is told so, with where the log now starts.
            stale = await fetch_one(client, "r", 0)
            assert stale.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            assert await earliest(client, "r") == start
            fresh = await fetch_one(client, "r", start)
            assert fresh.error_code == ErrorCode.NONE
            assert fresh.log_start_offset == start
            assert offsets_of(fresh.records)[0] == start
        finally:
            await client.aclose()


async def test_size_retention_set_live(tmp_path: Path) -> None:
    async with open_broker(tmp_path / "data", FAST_CHECKS) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            await create_topic(broker, "s", configs={"segment.bytes": "400"})
            for i in range(60):
                await produce(client, "s", batch([b"value-%03d" % i]))
            log = log_of(broker, "s")
            state_of(broker).logs.enforce_retention(int(time.time() * 1000))
            assert log.log_start_offset == 0  # retention.bytes -1 by default
            await alter_topic_config(broker, "s", "retention.bytes", "1000")
            await wait_for(lambda: log.log_start_offset > 0, "size retention")
            assert 1000 <= log.size_bytes() < 1000 + 400
        finally:
            await client.aclose()


@pytest.mark.parametrize(
    ("broker_keys", "effective", "synonym"),
    [
        ({}, 604_800_000, "log.retention.hours"),
        ({"log.retention.hours": "2"}, 7_200_000, "log.retention.hours"),
        (
            {"log.retention.hours": "2", "log.retention.minutes": "3"},
            180_000,
            "log.retention.minutes",
        ),
        ({"log.retention.minutes": "3", "log.retention.ms": "1234"}, 1234, "log.retention.ms"),
        ({"log.retention.ms": "-1"}, -1, "log.retention.ms"),
    ],
)
async def test_broker_retention_defaults(
    tmp_path: Path, broker_keys: dict[str, str], effective: int, synonym: str
) -> None:
    config = load_config(
        extra={"log.dirs": str(tmp_path), **broker_keys, "log.retention.bytes": "777"}
    )
    assert LogConfig.for_topic(config, {}).retention_ms == effective
    assert LogConfig.for_topic(config, {}).retention_bytes == 777
    assert LogConfig.for_topic(config, {"retention.ms": "5"}).retention_ms == 5
    async with open_broker(
        tmp_path / "data", {**broker_keys, "log.retention.bytes": "777"}
    ) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            await create_topic(broker, "d")
            assert log_of(broker, "d").config.retention_ms == effective
            entries = await describe_one(client, TOPIC, "d", "retention.ms", "retention.bytes")
            assert entries["retention.ms"].value == str(effective)
            assert entries["retention.bytes"].value == "777"
            if broker_keys:
                assert entries["retention.ms"].synonyms[0].name == synonym
        finally:
            await client.aclose()


async def _delete_records(client: KafkaClient, topic: str, offset: int) -> int:
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                name=topic, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(0, offset)]
            )
        ],
        timeout_ms=1000,
    )
    result = (await client.request(request, 2, DeleteRecordsResponse)).topics[0].partitions[0]
    assert result.error_code == ErrorCode.NONE
    return result.low_watermark


async def test_delete_records_inside_a_batch(broker: EmbeddedBroker, client: KafkaClient) -> None:
    """The log start may fall inside a batch: a fetch from there returns the whole batch, as
    Kafka's does, and offsets below the start are refused; a restart keeps the start."""
    await create_topic(broker, "dr", configs={"segment.bytes": "300"})
    for i in range(10):
        await produce(client, "dr", batch([b"a%d" % i, b"b%d" % i, b"c%d" % i]))
    assert await _delete_records(client, "dr", 13) == 13
    log = log_of(broker, "dr")
    assert log.segments[0].base_offset <= 12 < log.segments[0].next_offset
    assert (await fetch_one(client, "dr", 12)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    p = await fetch_one(client, "dr", 13)
    assert p.log_start_offset == 13
    assert next(o for o in offsets_of(p.records) if o >= 13) == 13
    assert await earliest(client, "dr") == 13
    # Retention later removes the segments wholly below the new start, nothing more.
    assert log.enforce_retention(int(time.time() * 1000)) == 0
    assert log.segments[0].next_offset > 13
