"""OffsetForLeaderEpoch: every version, known and unknown epochs, fencing."""

from __future__ import annotations

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from tests.broker.test_produce_helpers import batch, create_topic, produce, state_of

pytestmark = pytest.mark.trio


async def _ask(
    client: KafkaClient, epoch: int, version: int = 4, current: int = -1, topic: str = "t"
) -> OffsetForLeaderEpochResponse.EpochEndOffset:
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic, [OffsetForLeaderEpochRequest.OffsetForLeaderPartition(0, current, epoch)]
            )
        ],
    )
    response = await client.request(request, version, OffsetForLeaderEpochResponse)
    return response.topics[0].partitions[0]


@pytest.mark.parametrize("version", range(2, 5))
async def test_every_version(broker: EmbeddedBroker, client: KafkaClient, version: int) -> None:
    await create_topic(broker, "t")
    empty = await _ask(client, 0, version)
    assert (empty.error_code, empty.leader_epoch, empty.end_offset) == (ErrorCode.NONE, -1, -1)
    await produce(client, "t", batch([b"a", b"b", b"c"]))
    epoch = state_of(broker).image.partition("t", 0).leader_epoch  # type: ignore[union-attr]
    current = await _ask(client, epoch, version, current=epoch)
    assert (current.error_code, current.leader_epoch, current.end_offset) == (0, epoch, 3)
    unknown = await _ask(client, epoch + 3, version)
    assert (unknown.leader_epoch, unknown.end_offset) == (-1, -1)


async def test_errors(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    epoch = state_of(broker).image.partition("t", 0).leader_epoch  # type: ignore[union-attr]
    assert (await _ask(client, 0, topic="nope")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    fenced = await _ask(client, 0, current=epoch + 1)
    assert (fenced.error_code, fenced.end_offset) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1)
