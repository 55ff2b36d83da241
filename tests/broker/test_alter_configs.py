"""AlterConfigs (the legacy whole-resource replacement) over the wire."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from tests.broker.test_create_topics import create_topic
from tests.broker.test_describe_configs import describe_one
from tests.broker.test_incremental_alter_configs import partition_log, values

pytestmark = pytest.mark.trio

Resource = AlterConfigsRequest.AlterConfigsResource
Config = AlterConfigsRequest.AlterableConfig
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DYNAMIC_TOPIC, DEFAULT = 1, 5


async def alter(
    client: KafkaClient, *resources: Resource, version: int = 2, validate_only: bool = False
) -> list[tuple[int, str, int, str | None]]:
    request = AlterConfigsRequest(resources=list(resources), validate_only=validate_only)
    response = await client.request(request, version, AlterConfigsResponse)
    return [
        (r.resource_type, r.resource_name, r.error_code, r.error_message)
        for r in response.responses
    ]


def topic(name: str, **configs: str | None) -> Resource:
    return Resource(TOPIC, name, [Config(k.replace("_", "."), v) for k, v in configs.items()])


@pytest.mark.parametrize("version", range(3))
async def test_every_version_replaces_the_whole_set(client: KafkaClient, version: int) -> None:
    await create_topic(client, "t", retention_ms="5000", segment_ms="600000")
    result = await alter(client, topic("t", max_message_bytes="4096"), version=version)
    assert result == [(TOPIC, "t", 0, None)]
    assert await values(client, "t", "max.message.bytes", "retention.ms", "segment.ms") == {
        "max.message.bytes": ("4096", DYNAMIC_TOPIC),
        "retention.ms": ("604800000", DEFAULT),
        "segment.ms": ("604800000", DEFAULT),
    }


async def test_changes_reach_the_partition_logs(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(client, "live")
    assert await alter(client, topic("live", message_timestamp_type="LogAppendTime")) == [
        (TOPIC, "live", 0, None)
    ]
    assert partition_log(broker, "live").config.log_append_time
    assert await alter(client, topic("live")) == [(TOPIC, "live", 0, None)]
    assert not partition_log(broker, "live").config.log_append_time


async def test_validate_only_changes_nothing(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(client, "v", retention_ms="5000")
    assert await alter(client, topic("v"), validate_only=True) == [(TOPIC, "v", 0, None)]
    assert (await values(client, "v", "retention.ms"))["retention.ms"] == ("5000", DYNAMIC_TOPIC)
    assert partition_log(broker, "v").config.retention_ms == 5000


async def test_errors(client: KafkaClient) -> None:
    await create_topic(client, "e")
    results = await alter(
        client,
        topic("e", retention_ms="soon"),
        topic("missing", retention_ms="1"),
        topic("nulls", retention_ms=None),
        Resource(BROKER_LOGGER, "1", [Config("root", "INFO")]),
        Resource(BROKER, "7", [Config("message.max.bytes", "5000")]),
    )
    assert results[0][:3] == (TOPIC, "e", ErrorCode.INVALID_CONFIG)
    assert "retention.ms" in (results[0][3] or "")
    assert results[1:] == [
        (
            TOPIC,
            "missing",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "The topic 'missing' does not exist.",
        ),
        (TOPIC, "nulls", ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (BROKER_LOGGER, "1", ErrorCode.INVALID_REQUEST, "Unknown resource type 8"),
        (
            BROKER,
            "7",
            ErrorCode.INVALID_REQUEST,
            "Unexpected broker id, expected 1, but received 7",
        ),
    ]
    twice = await alter(client, topic("e", retention_ms="1"), topic("e", retention_ms="2"))
    assert (
        twice
        == [(TOPIC, "e", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    )
    assert (await values(client, "e", "retention.ms"))["retention.ms"][1] == DEFAULT


async def test_broker_resource(client: KafkaClient) -> None:
    default = Resource(BROKER, "", [Config("log.retention.ms", "1000")])
    assert await alter(client, default) == [(BROKER, "", 0, None)]
    # replacing the set deletes what the request leaves out
    other = Resource(BROKER, "", [Config("log.segment.bytes", "2000000")])
    assert await alter(client, other) == [(BROKER, "", 0, None)]
    assert list(await describe_one(client, BROKER, "")) == ["log.segment.bytes"]


async def test_changes_survive_a_restart(tmp_path: Path) -> None:
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        await create_topic(client, "kept")
        assert await alter(client, topic("kept", cleanup_policy="compact")) == [
            (TOPIC, "kept", 0, None)
        ]
        await client.aclose()
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        assert (await values(client, "kept", "cleanup.policy"))["cleanup.policy"] == (
            "compact",
            DYNAMIC_TOPIC,
        )
        assert partition_log(running, "kept").config.compact
        await client.aclose()
