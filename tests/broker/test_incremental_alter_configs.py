"""IncrementalAlterConfigs over the wire: operations, errors, live effect, loggers, restart."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.storage.log.partition import PartitionLog
from strom.wire.errors import ErrorCode
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from tests.broker.test_create_topics import create_topic
from tests.broker.test_describe_configs import describe_one

pytestmark = pytest.mark.trio

Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
Op = IncrementalAlterConfigsRequest.AlterableConfig
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


async def alter(
    client: KafkaClient, *resources: Resource, version: int = 1, validate_only: bool = False
) -> list[tuple[int, str, int, str | None]]:
    """(type, name, error code, message) per resource, in response order."""
    request = IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only)
    response = await client.request(request, version, IncrementalAlterConfigsResponse)
    return [
        (r.resource_type, r.resource_name, r.error_code, r.error_message)
        for r in response.responses
    ]


def topic(name: str, *ops: tuple[str, int, str | None]) -> Resource:
    return Resource(TOPIC, name, [Op(key, op, value) for key, op, value in ops])


def partition_log(broker: EmbeddedBroker, name: str, index: int = 0) -> PartitionLog:
    state = broker.broker.state
    assert state is not None
    found = state.logs.get(name, index)
    assert found is not None
    return found


async def values(client: KafkaClient, name: str, *keys: str) -> dict[str, tuple[str | None, int]]:
    entries = await describe_one(client, TOPIC, name, *keys)
    return {k: (e.value, e.config_source) for k, e in entries.items()}


@pytest.mark.parametrize("version", range(2))
async def test_every_version_sets_and_deletes(client: KafkaClient, version: int) -> None:
    await create_topic(client, "t", retention_ms="5000")
    ops = topic("t", ("segment.ms", SET, "600000"), ("retention.ms", DELETE, None))
    assert await alter(client, ops, version=version) == [(TOPIC, "t", 0, None)]
    assert await values(client, "t", "segment.ms", "retention.ms") == {
        "segment.ms": ("600000", 1),
        "retention.ms": ("604800000", 5),
    }


async def test_append_and_subtract_on_lists(client: KafkaClient) -> None:
    await create_topic(client, "l")
    assert await alter(client, topic("l", ("cleanup.policy", APPEND, "compact"))) == [
        (TOPIC, "l", 0, None)
    ]
    assert (await values(client, "l", "cleanup.policy"))["cleanup.policy"] == ("delete,compact", 1)
    await alter(client, topic("l", ("cleanup.policy", SUBTRACT, "delete")))
    assert (await values(client, "l", "cleanup.policy"))["cleanup.policy"] == ("compact", 1)
    [(_, _, code, message)] = await alter(client, topic("l", ("retention.ms", APPEND, "1")))
    assert (code, message) == (
        ErrorCode.INVALID_CONFIG,
        "Can't APPEND to key retention.ms because its type is not LIST.",
    )


async def test_changes_reach_the_partition_logs(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(client, "live", 2)
    assert not partition_log(broker, "live").config.log_append_time
    ops = topic(
        "live", ("message.timestamp.type", SET, "LogAppendTime"), ("max.message.bytes", SET, "2048")
    )
    assert await alter(client, ops) == [(TOPIC, "live", 0, None)]
    for index in range(2):
        config = partition_log(broker, "live", index).config
        assert config.log_append_time
        assert config.max_message_bytes == 2048
    await alter(client, topic("live", ("max.message.bytes", DELETE, None)))
    assert partition_log(broker, "live").config.max_message_bytes == 1048588


async def test_validate_only_changes_nothing(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(client, "v")
    ops = topic("v", ("max.message.bytes", SET, "2048"))
    assert await alter(client, ops, validate_only=True) == [(TOPIC, "v", 0, None)]
    assert (await values(client, "v", "max.message.bytes"))["max.message.bytes"][1] == 5
    assert partition_log(broker, "v").config.max_message_bytes == 1048588
    bad = topic("v", ("max.message.bytes", SET, "big"))
    [(_, _, code, _)] = await alter(client, bad, validate_only=True)
    assert code == ErrorCode.INVALID_CONFIG


async def test_topic_errors(client: KafkaClient) -> None:
    await create_topic(client, "e")
    results = await alter(
        client,
        topic("e", ("no.such.key", SET, "1")),
        topic("missing", ("retention.ms", SET, "1")),
        topic("bad/name", ("retention.ms", SET, "1")),
        topic("e2", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None)),
        topic("e3", ("retention.ms", SET, None)),
    )
    assert results == [
        (TOPIC, "e", ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.key"),
        (
            TOPIC,
            "missing",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "The topic 'missing' does not exist.",
        ),
        (TOPIC, "bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, results[2][3]),
        (TOPIC, "e2", ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
        (TOPIC, "e3", ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
    ]
    [(_, _, code, message)] = await alter(client, topic("e", ("retention.ms", SET, "-5")))
    assert code == ErrorCode.INVALID_CONFIG
    assert message is not None
    assert "retention.ms" in message


async def test_resource_named_twice(client: KafkaClient) -> None:
    await create_topic(client, "twice")
    ops = ("retention.ms", SET, "1000")
    results = await alter(client, topic("twice", ops), topic("twice", ops))
    assert (
        results
        == [(TOPIC, "twice", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")]
        * 2
    )


async def test_broker_resources(client: KafkaClient) -> None:
    ok = Resource(BROKER, "1", [Op("message.max.bytes", SET, "5000")])
    default = Resource(BROKER, "", [Op("log.retention.ms", SET, "1000")])
    other = Resource(BROKER, "2", [Op("message.max.bytes", SET, "5000")])
    assert await alter(client, ok, default, other) == [
        (BROKER, "1", 0, None),
        (BROKER, "", 0, None),
        (
            BROKER,
            "2",
            ErrorCode.INVALID_REQUEST,
            "Unexpected broker id, expected 1, but received 2",
        ),
    ]
    fixed = Resource(BROKER, "", [Op("num.partitions", SET, "3")])
    assert await alter(client, fixed) == [
        (
            BROKER,
            "",
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(num.partitions)",
        )
    ]
    entries = await describe_one(client, BROKER, "1", "message.max.bytes", "num.partitions")
    assert entries["message.max.bytes"].value == "5000"
    assert entries["num.partitions"].value == "1"


async def test_unknown_resource_types(client: KafkaClient) -> None:
    await create_topic(client, "ok")
    results = await alter(
        client,
        Resource(3, "x", [Op("a", SET, "b")]),
        topic("ok", ("retention.ms", SET, "1000")),
        Resource(3, "y", [Op("a", SET, "b"), Op("a", SET, "c")]),
    )
    assert results == [
        (3, "x", ErrorCode.INVALID_REQUEST, "Unknown resource type 3"),
        (TOPIC, "ok", 0, None),
        (3, "y", ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
    ]


async def test_broker_loggers(client: KafkaClient) -> None:
    logger = logging.getLogger("strom.test.loggers")
    logger.setLevel(logging.NOTSET)
    parent_level = logger.getEffectiveLevel()
    set_debug = Resource(BROKER_LOGGER, "1", [Op("strom.test.loggers", SET, "DEBUG")])
    assert await alter(client, set_debug, validate_only=True) == [(BROKER_LOGGER, "1", 0, None)]
    assert logger.level == logging.NOTSET
    assert await alter(client, set_debug) == [(BROKER_LOGGER, "1", 0, None)]
    assert logger.level == logging.DEBUG
    entries = await describe_one(client, BROKER_LOGGER, "1", "strom.test.loggers")
    assert entries["strom.test.loggers"].value == "DEBUG"
    unset = Resource(BROKER_LOGGER, "1", [Op("strom.test.loggers", DELETE, None)])
    assert await alter(client, unset) == [(BROKER_LOGGER, "1", 0, None)]
    assert logger.getEffectiveLevel() == parent_level


@pytest.mark.parametrize(
    ("name", "ops", "code", "message"),
    [
        (
            "1",
            [("no.such.logger", SET, "INFO")],
            ErrorCode.INVALID_CONFIG,
            "Logger no.such.logger does not exist!",
        ),
        (
            "1",
            [("root", SET, "LOUD")],
            ErrorCode.INVALID_CONFIG,
            "Cannot set the log level of root to LOUD as it is not a supported log level. "
            "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
        ),
        (
            "1",
            [("root", DELETE, None)],
            ErrorCode.INVALID_REQUEST,
            "Removing the log level of the root logger is not allowed",
        ),
        (
            "1",
            [("root", APPEND, "INFO")],
            ErrorCode.INVALID_REQUEST,
            "APPEND operation is not allowed for the BROKER_LOGGER resource",
        ),
        (
            "1",
            [("root", SET, None)],
            ErrorCode.INVALID_REQUEST,
            "Null value not supported for : root",
        ),
        (
            "2",
            [("root", SET, "INFO")],
            ErrorCode.INVALID_REQUEST,
            "Unexpected node id. Expected 1, but received 2",
        ),
        (
            "",
            [("root", SET, "INFO")],
            ErrorCode.INVALID_REQUEST,
            "Node id must be an integer, but it is: ",
        ),
    ],
)
async def test_broker_logger_errors(
    client: KafkaClient, name: str, ops: list[tuple[str, int, str | None]], code: int, message: str
) -> None:
    root_level = logging.getLogger().level
    resource = Resource(BROKER_LOGGER, name, [Op(*op) for op in ops])
    assert await alter(client, resource) == [(BROKER_LOGGER, name, code, message)]
    assert logging.getLogger().level == root_level


async def test_logger_levels_are_checked_before_any_is_applied(client: KafkaClient) -> None:
    logger = logging.getLogger("strom.test.atomic")
    logger.setLevel(logging.INFO)
    ops = [Op("strom.test.atomic", SET, "DEBUG"), Op("nope.nope", SET, "DEBUG")]
    [(_, _, code, _)] = await alter(client, Resource(BROKER_LOGGER, "1", ops))
    assert code == ErrorCode.INVALID_CONFIG
    assert logger.level == logging.INFO


async def test_changes_survive_a_restart(tmp_path: Path) -> None:
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        await create_topic(client, "kept")
        await alter(client, topic("kept", ("max.message.bytes", SET, "4096")))
        await client.aclose()
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        assert (await values(client, "kept", "max.message.bytes"))["max.message.bytes"] == (
            "4096",
            1,
        )
        assert partition_log(running, "kept").config.max_message_bytes == 4096
        await client.aclose()
