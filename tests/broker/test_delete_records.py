"""DeleteRecords: every version, high-watermark shortcut, errors, effect on reads."""

from __future__ import annotations

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from tests.broker.test_produce_helpers import batch, create_topic, fetch_one, produce, records_of

pytestmark = pytest.mark.trio


async def _delete(
    client: KafkaClient, offset: int, version: int = 2, topic: str = "t", partition: int = 0
) -> DeleteRecordsResponse.DeleteRecordsPartitionResult:
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                name=topic,
                partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition, offset)],
            )
        ],
        timeout_ms=1000,
    )
    response = await client.request(request, version, DeleteRecordsResponse)
    return response.topics[0].partitions[0]


@pytest.mark.parametrize("version", range(3))
async def test_every_version(broker: EmbeddedBroker, client: KafkaClient, version: int) -> None:
    await create_topic(broker, "t")
    for i in range(5):
        await produce(client, "t", batch([b"%d" % i]))
    result = await _delete(client, 3, version)
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 3)
    stale = await fetch_one(client, "t", 1)
    assert stale.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    data = await fetch_one(client, "t", 3)
    assert data.log_start_offset == 3
    assert records_of(data.records) == [(3, b"3"), (4, b"4")]
    # lower than the log start: no change
    assert (await _delete(client, 1, version)).low_watermark == 3
    assert (await _delete(client, -1, version)).low_watermark == 5


async def test_errors(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    await produce(client, "t", batch())
    beyond = await _delete(client, 9)
    assert (beyond.error_code, beyond.low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert (await _delete(client, -7)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (await _delete(client, 0, topic="nope")).error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    await create_topic(broker, "compacted", configs={"cleanup.policy": "compact"})
    assert (await _delete(client, 0, topic="compacted")).error_code == ErrorCode.POLICY_VIOLATION
