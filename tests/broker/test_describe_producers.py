"""DescribeProducers: idempotent producers per partition, errors."""

from __future__ import annotations

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from tests.broker.test_produce_helpers import batch, create_topic, produce

pytestmark = pytest.mark.trio


async def _describe(
    client: KafkaClient, topic: str, *partitions: int
) -> list[DescribeProducersResponse.PartitionResponse]:
    request = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(topic, list(partitions))]
    )
    response = await client.request(request, 0, DescribeProducersResponse)
    return response.topics[0].partitions


async def test_lists_producers(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t", partitions=2)
    await produce(client, "t", batch([b"a", b"b"], pid=42, epoch=3, seq=0, ts=1000))
    await produce(client, "t", batch([b"plain"]))
    p0, p1 = await _describe(client, "t", 0, 1)
    assert p0.error_code == ErrorCode.NONE
    [state] = p0.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (42, 3, 1)
    assert state.last_timestamp == 1001
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    assert p1.active_producers == []


async def test_errors(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    [missing] = await _describe(client, "nope", 0)
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.error_message == "This server does not host this topic-partition."
    [bad] = await _describe(client, "bad/name", 0)
    assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    [partition] = await _describe(client, "t", 7)
    assert (partition.error_code, partition.error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        None,
    )
