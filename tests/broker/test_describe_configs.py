"""DescribeConfigs over the wire: every version, TOPIC / BROKER / BROKER_LOGGER, errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from strom.broker.handlers.describe_configs import INVALID_REQUEST_MESSAGE
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from tests.broker.test_create_topics import create_topic

pytestmark = pytest.mark.trio

Resource = DescribeConfigsRequest.DescribeConfigsResource
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, LOGGER = 1, 2, 3, 4, 5, 6


async def describe(
    client: KafkaClient,
    *resources: Resource,
    version: int = 4,
    synonyms: bool = False,
    documentation: bool = False,
) -> list[Result]:
    request = DescribeConfigsRequest(
        resources=list(resources), include_synonyms=synonyms, include_documentation=documentation
    )
    return (await client.request(request, version, DescribeConfigsResponse)).results


async def describe_one(client: KafkaClient, rtype: int, name: str, *keys: str) -> dict[str, Entry]:
    [result] = await describe(client, Resource(rtype, name, list(keys) or None), synonyms=True)
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, "")
    return {e.name: e for e in result.configs}


async def set_configs(client: KafkaClient, rtype: int, name: str, **values: str) -> None:
    """SET configs through IncrementalAlterConfigs (keys use underscores for dots)."""
    ops = [
        IncrementalAlterConfigsRequest.AlterableConfig(k.replace("_", "."), 0, v)
        for k, v in values.items()
    ]
    request = IncrementalAlterConfigsRequest(
        resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(rtype, name, ops)]
    )
    response = await client.request(request, 1, IncrementalAlterConfigsResponse)
    assert [(r.error_code, r.error_message) for r in response.responses] == [(0, None)]


def synonyms(entry: Entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


@pytest.mark.parametrize("version", range(1, 5))
async def test_every_version_describes_a_topic(client: KafkaClient, version: int) -> None:
    await create_topic(client, "t", retention_ms="5000")
    resource = Resource(TOPIC, "t", ["retention.ms", "segment.bytes", "no.such.key"])
    docs = version >= 3
    [result] = await describe(client, resource, version=version, synonyms=True, documentation=docs)
    assert (result.resource_type, result.resource_name, result.error_code) == (TOPIC, "t", 0)
    entries = {e.name: e for e in result.configs}
    assert list(entries) == ["retention.ms", "segment.bytes"]
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("5000", 1, False)
    assert not retention.is_sensitive
    assert synonyms(retention)[0] == ("retention.ms", "5000", DYNAMIC_TOPIC)
    segment = entries["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1073741824", DEFAULT)
    assert synonyms(segment) == [("log.segment.bytes", "1073741824", DEFAULT)]
    if version >= 3:
        assert (retention.config_type, segment.config_type) == (5, 3)  # LONG, INT
        assert retention.documentation


async def test_keys_null_or_empty_mean_all(client: KafkaClient) -> None:
    await create_topic(client, "all")
    every, empty, none = await describe(
        client,
        Resource(TOPIC, "all", None),
        Resource(TOPIC, "all", []),
        Resource(TOPIC, "all", ["x"]),
    )
    assert len(every.configs) > 30
    assert [e.name for e in every.configs] == sorted(e.name for e in every.configs)
    assert [e.name for e in empty.configs] == [e.name for e in every.configs]
    assert none.configs == []


async def test_synonyms_and_documentation_only_when_asked(client: KafkaClient) -> None:
    await create_topic(client, "plain")
    [result] = await describe(client, Resource(TOPIC, "plain", ["cleanup.policy"]))
    [entry] = result.configs
    assert entry.synonyms == []
    assert entry.documentation is None
    assert (entry.value, entry.config_source, entry.config_type) == ("delete", DEFAULT, 7)


async def test_topic_errors(client: KafkaClient) -> None:
    unknown, invalid = await describe(client, Resource(TOPIC, "nope"), Resource(TOPIC, "bad/name"))
    assert (unknown.error_code, unknown.error_message, unknown.configs) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "",
        [],
    )
    assert (unknown.resource_type, unknown.resource_name) == (TOPIC, "nope")
    assert invalid.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "Topic name is invalid" in (invalid.error_message or "")


async def test_broker_static_and_default_values(tmp_path: Path) -> None:
    async with open_broker(tmp_path, {"log.retention.hours": "24", "num.partitions": "3"}) as b:
        client = await KafkaClient.connect(b.bootstrap)
        entries = await describe_one(client, BROKER, "1")
        assert len(entries) > 100
        partitions = entries["num.partitions"]
        assert (partitions.value, partitions.config_source, partitions.read_only) == (
            "3",
            STATIC,
            True,
        )
        hours = entries["log.retention.hours"]
        assert (hours.value, hours.config_source, hours.read_only) == ("24", STATIC, True)
        assert entries["node.id"].value == "1"
        assert entries["message.max.bytes"].read_only is False
        assert entries["broker.rack"].value is None
        # read-only as in Kafka 4 (advertised.listeners), or until Strom can rebind at runtime
        for key in ("listeners", "advertised.listeners", "listener.security.protocol.map"):
            assert entries[key].read_only is True, key
        await client.aclose()


async def test_thread_counts_say_they_are_ignored(client: KafkaClient) -> None:
    """Kafka's thread-pool sizes are dynamic there; Strom accepts them and says they do nothing."""
    [result] = await describe(
        client, Resource(BROKER, "1", ["num.io.threads", "num.network.threads"]), documentation=True
    )
    assert [(e.name, e.read_only, e.documentation) for e in result.configs] == [
        ("num.io.threads", False, "Accepted for compatibility; ignored (trio)."),
        ("num.network.threads", False, "Accepted for compatibility; ignored (trio)."),
    ]


async def test_broker_dynamic_values(client: KafkaClient) -> None:
    await set_configs(client, BROKER, "", log_retention_ms="1000", message_max_bytes="2000")
    await set_configs(client, BROKER, "1", message_max_bytes="3000")
    entries = await describe_one(client, BROKER, "1", "message.max.bytes", "log.retention.ms")
    size = entries["message.max.bytes"]
    assert (size.value, size.config_source) == ("3000", DYNAMIC_BROKER)
    assert synonyms(size) == [
        ("message.max.bytes", "3000", DYNAMIC_BROKER),
        ("message.max.bytes", "2000", DYNAMIC_DEFAULT),
        ("message.max.bytes", "1048588", DEFAULT),
    ]
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.config_source) == ("1000", DYNAMIC_DEFAULT)
    # a topic without overrides inherits the dynamic values, and says so
    await create_topic(client, "inherits")
    topic = await describe_one(client, TOPIC, "inherits", "max.message.bytes", "retention.ms")
    assert (topic["max.message.bytes"].value, topic["max.message.bytes"].config_source) == (
        "3000",
        DYNAMIC_BROKER,
    )
    assert (topic["retention.ms"].value, topic["retention.ms"].config_source) == (
        "1000",
        DYNAMIC_DEFAULT,
    )


async def test_cluster_default_resource_lists_only_dynamic_defaults(client: KafkaClient) -> None:
    assert await describe_one(client, BROKER, "") == {}
    await set_configs(client, BROKER, "", log_retention_ms="1000", custom_plugin_setting="x")
    await set_configs(client, BROKER, "1", log_segment_bytes="2000000")
    entries = await describe_one(client, BROKER, "")
    assert list(entries) == ["custom.plugin.setting", "log.retention.ms"]
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == (
        "1000",
        DYNAMIC_DEFAULT,
        False,
    )
    assert synonyms(retention) == [("log.retention.ms", "1000", DYNAMIC_DEFAULT)]
    custom = entries["custom.plugin.setting"]  # Kafka cannot type it, so it hides it
    assert (custom.value, custom.is_sensitive, custom.read_only, custom.config_type) == (
        None,
        True,
        True,
        0,
    )
    per_broker = await describe_one(client, BROKER, "1", "custom.plugin.setting")
    assert per_broker["custom.plugin.setting"].config_source == DYNAMIC_DEFAULT


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("2", "Unexpected broker id, expected 1 or empty string, but received 2"),
        ("one", "Broker id must be an integer, but it is: one"),
    ],
)
async def test_broker_errors(client: KafkaClient, name: str, message: str) -> None:
    [result] = await describe(client, Resource(BROKER, name))
    assert (result.error_code, result.error_message, result.configs) == (
        ErrorCode.INVALID_REQUEST,
        message,
        [],
    )


async def test_broker_loggers(client: KafkaClient) -> None:
    logging.getLogger("strom.test.describe").setLevel(logging.DEBUG)
    [result] = await describe(client, Resource(BROKER_LOGGER, "1"))
    entries = {e.name: e for e in result.configs}
    assert "root" in entries
    mine = entries["strom.test.describe"]
    assert (mine.value, mine.config_source, mine.read_only, mine.is_sensitive) == (
        "DEBUG",
        LOGGER,
        False,
        False,
    )
    assert (mine.synonyms, mine.config_type, mine.documentation) == ([], 0, "")
    [only] = await describe(client, Resource(BROKER_LOGGER, "1", ["strom.test.describe"]))
    assert [e.name for e in only.configs] == ["strom.test.describe"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Broker id must not be empty"),
        ("2", "Unexpected broker id, expected 1 but received 2"),
        ("x", "Broker id must be an integer, but it is: x"),
    ],
)
async def test_broker_logger_errors(client: KafkaClient, name: str, message: str) -> None:
    [result] = await describe(client, Resource(BROKER_LOGGER, name))
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, message)


async def test_types_strom_does_not_keep(client: KafkaClient) -> None:
    await create_topic(client, "fine")
    topic, metrics = await describe(
        client, Resource(TOPIC, "fine", ["retention.ms"]), Resource(16, "m")
    )
    assert topic.error_code == ErrorCode.NONE
    assert (metrics.error_code, metrics.resource_type) == (ErrorCode.INVALID_REQUEST, 16)


async def test_unknown_type_fails_the_whole_request(client: KafkaClient) -> None:
    await create_topic(client, "fine")
    results = await describe(client, Resource(TOPIC, "fine"), Resource(3, "what"))
    assert [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in results] == [
        (TOPIC, "fine", ErrorCode.INVALID_REQUEST, INVALID_REQUEST_MESSAGE),
        (3, "what", ErrorCode.INVALID_REQUEST, INVALID_REQUEST_MESSAGE),
    ]
    assert all(r.configs == [] for r in results)
