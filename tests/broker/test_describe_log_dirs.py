"""DescribeLogDirs: every version, filters, sizes, space."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from tests.broker.test_produce_helpers import batch, create_topic, produce, state_of

pytestmark = pytest.mark.trio


@pytest.mark.parametrize("version", range(1, 5))
async def test_every_version(
    broker: EmbeddedBroker, client: KafkaClient, version: int, tmp_path: Path
) -> None:
    await create_topic(broker, "a", partitions=2)
    await create_topic(broker, "b")
    await produce(client, "a", batch([b"x" * 100]))
    response = await client.request(
        DescribeLogDirsRequest(topics=None), version, DescribeLogDirsResponse
    )
    [result] = response.results
    assert result.error_code == ErrorCode.NONE
    assert result.log_dir == str((tmp_path / "data").resolve())
    sizes = {
        (t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions
    }
    log = state_of(broker).logs.get("a", 0)
    assert log is not None
    assert sizes == {("a", 0): log.size_bytes(), ("a", 1): 0, ("b", 0): 0}
    assert all(p.offset_lag == 0 for t in result.topics for p in t.partitions)
    if version >= 4:
        assert result.total_bytes > 0
        assert 0 <= result.usable_bytes <= result.total_bytes
    else:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)


async def test_filtered_like_kafka(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "a", partitions=2)
    await create_topic(broker, "b")
    request = DescribeLogDirsRequest(
        topics=[
            DescribeLogDirsRequest.DescribableLogDirTopic("a", [1]),
            DescribeLogDirsRequest.DescribableLogDirTopic("missing", [0]),
        ]
    )
    [result] = (await client.request(request, 4, DescribeLogDirsResponse)).results
    # every topic of the directory is listed, with only the requested partitions
    assert {t.name: [p.partition_index for p in t.partitions] for t in result.topics} == {
        "a": [1],
        "b": [],
    }
