"""ListOffsets: every version, the special timestamps, timestamp lookups, errors."""

from __future__ import annotations

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from tests.broker.test_produce_helpers import T0, batch, create_topic, produce, state_of

pytestmark = pytest.mark.trio

Partition = ListOffsetsRequest.ListOffsetsPartition


def _request(
    topic: str, *timestamps: int, partition: int = 0, epoch: int = -1
) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[Partition(partition, epoch, ts) for ts in timestamps],
            )
        ],
    )


async def _one(
    client: KafkaClient, ts: int, version: int = 10, topic: str = "t", **kw: int
) -> ListOffsetsResponse.ListOffsetsPartitionResponse:
    response = await client.request(_request(topic, ts, **kw), version, ListOffsetsResponse)
    return response.topics[0].partitions[0]


async def _setup(broker: EmbeddedBroker, client: KafkaClient) -> int:
    """Offsets 0-5 with timestamps T0+0, +1 | T0+100, +101 | T0+50, +51; returns the epoch."""
    await create_topic(broker, "t")
    for ts in (T0, T0 + 100, T0 + 50):
        await produce(client, "t", batch([b"a", b"b"], ts=ts))
    return state_of(broker).image.partition("t", 0).leader_epoch  # type: ignore[union-attr]


@pytest.mark.parametrize("version", range(1, 11))
async def test_every_version(broker: EmbeddedBroker, client: KafkaClient, version: int) -> None:
    epoch = await _setup(broker, client)
    latest = await _one(client, -1, version)
    earliest = await _one(client, -2, version)
    assert (latest.error_code, latest.offset, latest.timestamp) == (ErrorCode.NONE, 6, -1)
    assert (earliest.offset, earliest.timestamp) == (0, -1)
    assert latest.leader_epoch == (epoch if version >= 4 else -1)
    by_time = await _one(client, T0 + 60, version)
    assert (by_time.offset, by_time.timestamp) == (2, T0 + 100)


async def test_special_timestamps(broker: EmbeddedBroker, client: KafkaClient) -> None:
    epoch = await _setup(broker, client)
    top = await _one(client, -3)
    assert (top.offset, top.timestamp, top.leader_epoch) == (3, T0 + 101, epoch)
    local = await _one(client, -4)
    assert (local.offset, local.timestamp, local.leader_epoch) == (0, -1, epoch)
    tiered = await _one(client, -5)
    assert (tiered.error_code, tiered.offset, tiered.timestamp, tiered.leader_epoch) == (
        0,
        -1,
        -1,
        -1,
    )
    beyond = await _one(client, T0 + 10_000)
    assert (beyond.error_code, beyond.offset, beyond.timestamp) == (ErrorCode.NONE, -1, -1)
    exact = await _one(client, T0 + 51)
    assert (exact.offset, exact.timestamp) == (2, T0 + 100)


async def test_read_committed_latest_is_the_lso(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await _setup(broker, client)
    request = _request("t", -1)
    request.isolation_level = 1
    response = await client.request(request, 5, ListOffsetsResponse)
    assert response.topics[0].partitions[0].offset == 6


async def test_errors(broker: EmbeddedBroker, client: KafkaClient) -> None:
    epoch = await _setup(broker, client)
    assert (await _one(client, -1, topic="nope")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await _one(client, -1, partition=4)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    newer = await _one(client, -1, epoch=epoch + 1)
    assert (newer.error_code, newer.offset, newer.timestamp) == (
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        -1,
        -1,
    )
    assert (await _one(client, -1, epoch=epoch)).error_code == ErrorCode.NONE


async def test_duplicate_partitions_are_invalid(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await _setup(broker, client)
    request = _request("t", -1, -2)
    request.topics[0].partitions.append(Partition(5, -1, -1))
    response = await client.request(request, 7, ListOffsetsResponse)
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]


@pytest.mark.parametrize(("ts", "first_version"), [(-3, 7), (-4, 8), (-5, 9)])
async def test_special_timestamps_before_their_version_are_unsupported(
    broker: EmbeddedBroker, client: KafkaClient, ts: int, first_version: int
) -> None:
    """As Kafka 4.1 answers (differential): per partition, before the topic is even looked up."""
    await _setup(broker, client)
    for version in range(1, first_version):
        for topic in ("t", "nope"):
            p = await _one(client, ts, version, topic=topic)
            assert (p.error_code, p.offset, p.timestamp) == (ErrorCode.UNSUPPORTED_VERSION, -1, -1)
    assert (await _one(client, ts, first_version)).error_code == ErrorCode.NONE
    assert (await _one(client, ts, first_version, topic="nope")).error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
