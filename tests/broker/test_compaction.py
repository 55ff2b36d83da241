"""Compacted topics over the wire: keyless records refused, the cleaner thread at work,
__consumer_offsets compacted and read back after a restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.storage import LogCleaner, PartitionLog
from strom.wire.errors import ErrorCode
from strom.wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from strom.wire.records import Record, build_batch, decode_batch, iter_batches
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

FAST_CLEANER = {"log.cleaner.backoff.ms": "20"}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "2000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
}


def records(
    data: bytes | bytearray | memoryview | None,
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in fetched bytes (offsets may have gaps)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    for header, view in iter_batches(memoryview(bytes(data or b""))):
        out.extend((r.offset, r.key, r.value) for r in decode_batch(view, header)[1])
    return out


def log_of(broker: EmbeddedBroker, topic: str, partition: int = 0) -> PartitionLog:
    found = state_of(broker).logs.get(topic, partition)
    assert found is not None
    return found


def cleaner_of(broker: EmbeddedBroker) -> LogCleaner:
    assert broker.broker.cleaner is not None
    return broker.broker.cleaner


async def read_from_zero(
    client: KafkaClient, topic: str
) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = 0
    while True:
        p = await fetch_one(client, topic, offset, partition_max_bytes=4096)
        assert p.error_code == ErrorCode.NONE
        got = [r for r in records(p.records) if r[0] >= offset]
        if not got:
            return out
        out.extend(got)
        offset = got[-1][0] + 1


async def test_keyless_records_are_refused_with_record_errors(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "c", configs={"cleanup.policy": "compact"})
    p = await produce(client, "c", batch([b"a", b"b", b"c"], keys=[b"k", None, None]))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
        (1, "compacted topic cannot accept a record without a key"),
        (2, "compacted topic cannot accept a record without a key"),
    ]
    assert p.error_message == "compacted topic cannot accept a record without a key"
    assert log_of(broker, "c").log_end_offset == 0
    p = await produce(client, "c", batch([b"a"], keys=[b"k"]))
    assert p.error_code == ErrorCode.NONE
    # Switching a topic to compact takes effect at once; back to delete, keyless are fine again.
    await create_topic(broker, "d")
    assert (await produce(client, "d", batch([b"x"], keys=[None]))).error_code == ErrorCode.NONE
    await alter_topic_config(broker, "d", "cleanup.policy", "compact,delete")
    assert (
        await produce(client, "d", batch([b"x"], keys=[None]))
    ).error_code == ErrorCode.INVALID_RECORD
    await alter_topic_config(broker, "d", "cleanup.policy", "delete")
    assert (await produce(client, "d", batch([b"x"], keys=[None]))).error_code == ErrorCode.NONE


async def test_the_cleaner_thread_compacts_a_topic_while_it_is_written(tmp_path: Path) -> None:
    async with open_broker(tmp_path / "data", FAST_CLEANER) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            await create_topic(broker, "changelog", configs=COMPACTED)
            latest: dict[bytes, tuple[int, bytes | None]] = {}
            for i in range(300):
                key = b"user-%d" % (i % 10)
                value = None if i % 37 == 5 else b"state-%d" % i
                p = await produce(client, "changelog", keyed(key, value))
                assert p.error_code == ErrorCode.NONE
                latest[key] = (p.base_offset, value)
            log = log_of(broker, "changelog")
            cleaner = cleaner_of(broker)
            await wait_for(lambda: log.clean_offset == log.segments[-1].base_offset, "a full pass")
            assert cleaner.passes >= 1
            seen = await read_from_zero(client, "changelog")
            offsets = [o for o, _, _ in seen]
            assert offsets == sorted(set(offsets))
            assert len(seen) < 300
            visible = {(o, k, v) for o, k, v in seen}
            for key, (offset, value) in latest.items():
                if value is not None:
                    assert (offset, key, value) in visible
            active = log.segments[-1].base_offset
            below = [k for o, k, _ in seen if o < active]
            assert len(below) == len(set(below))  # one record per key in the cleaned part
        finally:
            await client.aclose()


def keyed(key: bytes, value: bytes | None) -> bytes:
    """One record (a tombstone when `value` is None) as a producer sends it."""
    return bytes(build_batch([Record(key, value, (), int(time.time() * 1000))]))


def _commit(group: str, topic: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(0, offset)]
            )
        ],
    )


async def _committed(client: KafkaClient, group: str, topic: str) -> int:
    request = OffsetFetchRequest(
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
    )
    response = await client.request(request, 7, OffsetFetchResponse)
    return response.topics[0].partitions[0].committed_offset


async def test_consumer_offsets_is_compacted_and_reloads(tmp_path: Path) -> None:
    overrides = {
        **FAST_CLEANER,
        "offsets.topic.num.partitions": "1",
        "offsets.topic.segment.bytes": "1500",
        "log.cleaner.min.cleanable.ratio": "0.01",
    }
    async with open_broker(tmp_path / "data", overrides) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            await create_topic(broker, "t")
            for i in range(200):
                response = await client.request(
                    _commit(f"g{i % 3}", "t", i), 9, OffsetCommitResponse
                )
                assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
            offsets = log_of(broker, "__consumer_offsets")
            assert offsets.config.compact
            await wait_for(
                lambda: offsets.clean_offset == offsets.segments[-1].base_offset,
                "__consumer_offsets to be cleaned",
            )
            assert offsets.size_bytes() < 200 * 60
        finally:
            await client.aclose()
    async with open_broker(tmp_path / "data", overrides) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            assert [await _committed(client, f"g{g}", "t") for g in range(3)] == [198, 199, 197]
        finally:
            await client.aclose()
