"""Group configs (ConfigResource GROUP, KIP-848): the keys, defaults and validation of
`strom.config.group`, and DescribeConfigs / IncrementalAlterConfigs / AlterConfigs over the
wire as Apache Kafka 4.1.1 answers them (values, sources, errors, ACLs, a restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import open_broker
from strom.config import BrokerConfig, ConfigError, describe_group_config, validate_group_overrides
from strom.coordinator.metadata.acls import AclOperation as Op
from strom.coordinator.metadata.acls import PatternType, Permission
from strom.coordinator.metadata.acls import ResourceType as R
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from strom.wire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from tests.broker.test_acls import SECURED, as_user, create_acls

GROUP, DEFAULT, GROUP_CONFIG = 32, 5, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INT, STRING = 3, 2

KAFKA_DEFAULTS = {
    "consumer.heartbeat.interval.ms": ("5000", INT),
    "consumer.session.timeout.ms": ("45000", INT),
    "share.auto.offset.reset": ("latest", STRING),
    "share.heartbeat.interval.ms": ("5000", INT),
    "share.isolation.level": ("read_uncommitted", STRING),
    "share.record.lock.duration.ms": ("30000", INT),
    "share.session.timeout.ms": ("45000", INT),
    "streams.heartbeat.interval.ms": ("5000", INT),
    "streams.num.standby.replicas": ("0", INT),
    "streams.session.timeout.ms": ("45000", INT),
}
"""What Apache Kafka 4.1.1 answers for a group with no configs (names, values, types)."""


# --- the config module -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"no.such": "1"}, "Unknown group config name: no.such"),
        ({"consumer.session.timeout.ms": "5"},
         "consumer.session.timeout.ms must be greater than or equal to "
         "group.consumer.min.session.timeout.ms"),
        ({"consumer.heartbeat.interval.ms": "45000"},
         "consumer.heartbeat.interval.ms must be less than or equal to "
         "group.consumer.max.heartbeat.interval.ms"),
        ({"share.record.lock.duration.ms": "70000"},
         "share.record.lock.duration.ms must be less than or equal to "
         "group.share.max.record.lock.duration.ms"),
        ({"streams.num.standby.replicas": "3"},
         "streams.num.standby.replicas must be less than or equal to "
         "group.streams.max.standby.replicas"),
        ({"consumer.session.timeout.ms": "abc"}, "consumer.session.timeout.ms"),
        ({"streams.num.standby.replicas": "-1"}, "streams.num.standby.replicas"),
        ({"share.auto.offset.reset": "bogus"}, "share.auto.offset.reset"),
        ({"share.auto.offset.reset": "by_duration:-PT1H"}, "share.auto.offset.reset"),
        ({"share.isolation.level": "READ_COMMITTED"}, "share.isolation.level"),
    ],
)  # fmt: skip
def test_validation_refuses_what_kafka_refuses(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        validate_group_overrides(overrides, BrokerConfig())
    assert message in str(refused.value)


def test_bounds_and_defaults_come_from_the_broker() -> None:
    wide = BrokerConfig.from_properties({
        "group.consumer.min.session.timeout.ms": "10000",
        "group.consumer.session.timeout.ms": "20000",
        "group.consumer.min.heartbeat.interval.ms": "1000",
        "group.consumer.heartbeat.interval.ms": "2000",
    })  # fmt: skip
    assert validate_group_overrides({"consumer.session.timeout.ms": "12000"}, wide) == {
        "consumer.session.timeout.ms": 12000
    }
    with pytest.raises(ConfigError, match="greater than or equal"):
        validate_group_overrides({"consumer.session.timeout.ms": "12000"}, BrokerConfig())
    entries = {e.name: e for e in describe_group_config(wide, {})}
    assert (entries["consumer.session.timeout.ms"].value,
            entries["consumer.session.timeout.ms"].source) == ("20000", DEFAULT)  # fmt: skip
    # the session must outlast the heartbeat
    with pytest.raises(ConfigError, match=r"must be greater than consumer\.heartbeat"):
        validate_group_overrides({"consumer.session.timeout.ms": "12000",
                                  "consumer.heartbeat.interval.ms": "15000"}, wide)  # fmt: skip
    assert validate_group_overrides(
        {"share.auto.offset.reset": "by_duration:P1DT2H30M1.5S", "share.isolation.level":
         "read_committed", "streams.num.standby.replicas": "2"}, BrokerConfig())  # fmt: skip


def test_a_broker_default_outside_its_bounds_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match=r"group\.consumer\.session\.timeout\.ms"):
        BrokerConfig.from_properties({"group.consumer.session.timeout.ms": "1000"})


# --- over the wire -----------------------------------------------------------------------

Resource = DescribeConfigsRequest.DescribeConfigsResource


async def describe(client: KafkaClient, name: str, keys: list[str] | None = None,
                   version: int = 4) -> DescribeConfigsResponse.DescribeConfigsResult:  # fmt: skip
    request = DescribeConfigsRequest(
        resources=[Resource(GROUP, name, keys)],
        include_synonyms=True,
        include_documentation=version >= 3,
    )
    [result] = (await client.request(request, version, DescribeConfigsResponse)).results
    return result


def values(
    result: DescribeConfigsResponse.DescribeConfigsResult,
) -> dict[str, tuple[str | None, int]]:
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, "")
    return {c.name: (c.value, c.config_source) for c in result.configs}


async def alter(client: KafkaClient, name: str, *ops: tuple[str, int, str | None],
                validate_only: bool = False) -> tuple[int, str | None]:  # fmt: skip
    request = IncrementalAlterConfigsRequest(
        resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(GROUP, name, [
            IncrementalAlterConfigsRequest.AlterableConfig(k, op, v) for k, op, v in ops])],
        validate_only=validate_only,
    )  # fmt: skip
    [result] = (await client.request(request, 1, IncrementalAlterConfigsResponse)).responses
    return result.error_code, result.error_message


@pytest.mark.trio
async def test_a_group_without_configs_describes_kafkas_defaults(client: KafkaClient) -> None:
    result = await describe(client, "no-such-group")
    assert {c.name: (c.value, c.config_type) for c in result.configs} == KAFKA_DEFAULTS
    for entry in result.configs:
        assert (entry.config_source, entry.read_only, entry.is_sensitive) == (DEFAULT, False, False)
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
            (entry.name, entry.value, DEFAULT)
        ]
        assert entry.documentation
    assert values(await describe(client, "g", ["consumer.session.timeout.ms", "nope"])) == {
        "consumer.session.timeout.ms": ("45000", DEFAULT)
    }
    empty = await describe(client, "")
    assert (empty.error_code, empty.error_message) == (
        ErrorCode.INVALID_REQUEST, "Group name must not be empty")  # fmt: skip


@pytest.mark.trio
async def test_set_delete_and_errors_as_kafka(client: KafkaClient) -> None:
    assert await alter(client, "g1", ("consumer.session.timeout.ms", SET, "50000"),
                       ("share.isolation.level", SET, "read_committed")) == (0, None)  # fmt: skip
    described = values(await describe(client, "g1"))
    assert described["consumer.session.timeout.ms"] == ("50000", GROUP_CONFIG)
    assert described["share.isolation.level"] == ("read_committed", GROUP_CONFIG)
    assert described["consumer.heartbeat.interval.ms"] == ("5000", DEFAULT)
    assert values(await describe(client, "g2")) == {k: (v, DEFAULT) for k, (v, _) in
                                                     KAFKA_DEFAULTS.items()}  # fmt: skip
    code, _ = await alter(client, "g1", ("consumer.session.timeout.ms", SET, "5"))
    assert code == ErrorCode.INVALID_CONFIG
    assert await alter(client, "g1", ("no.such", SET, "1")) == (
        ErrorCode.INVALID_CONFIG, "Unknown group config name: no.such")  # fmt: skip
    assert await alter(client, "g1", ("consumer.session.timeout.ms", APPEND, "1")) == (
        ErrorCode.INVALID_CONFIG,
        "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")  # fmt: skip
    assert (await alter(client, "g1", ("consumer.session.timeout.ms", SUBTRACT, "1")))[0] == (
        ErrorCode.INVALID_CONFIG)  # fmt: skip
    assert await alter(client, "g1", ("consumer.session.timeout.ms", SET, None)) == (
        ErrorCode.INVALID_REQUEST,
        "Null value not supported for : consumer.session.timeout.ms",
    )
    assert await alter(client, "", ("consumer.session.timeout.ms", SET, "50000")) == (
        ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")  # fmt: skip
    assert await alter(client, "g1", ("share.session.timeout.ms", SET, "50000"),
                       validate_only=True) == (0, None)  # fmt: skip
    assert values(await describe(client, "g1"))["share.session.timeout.ms"] == ("45000", DEFAULT)
    # refused changes left the group as it was
    assert values(await describe(client, "g1"))["consumer.session.timeout.ms"] == (
        "50000", GROUP_CONFIG)  # fmt: skip
    assert await alter(client, "g1", ("consumer.session.timeout.ms", DELETE, None),
                       ("streams.num.standby.replicas", DELETE, None)) == (0, None)  # fmt: skip
    assert values(await describe(client, "g1"))["consumer.session.timeout.ms"] == (
        "45000", DEFAULT)  # fmt: skip


@pytest.mark.trio
async def test_legacy_alter_configs_replaces_the_group_set(client: KafkaClient) -> None:
    assert await alter(client, "g3", ("share.isolation.level", SET, "read_committed")) == (0, None)
    request = AlterConfigsRequest(
        resources=[
            AlterConfigsRequest.AlterConfigsResource(
                GROUP,
                "g3",
                [AlterConfigsRequest.AlterableConfig("consumer.session.timeout.ms", "50000")],
            )
        ]
    )
    response = await client.request(request, 2, AlterConfigsResponse)
    assert [(r.error_code, r.error_message) for r in response.responses] == [(0, None)]
    described = values(await describe(client, "g3", None, version=1))
    assert described["consumer.session.timeout.ms"] == ("50000", GROUP_CONFIG)
    assert described["share.isolation.level"] == ("read_uncommitted", DEFAULT)


@pytest.mark.trio
async def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    async with open_broker(tmp_path / "data") as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        assert await alter(client, "kept", ("consumer.heartbeat.interval.ms", SET, "6000")) == (
            0, None)  # fmt: skip
        await client.aclose()
    async with open_broker(tmp_path / "data") as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        assert values(await describe(client, "kept"))["consumer.heartbeat.interval.ms"] == (
            "6000", GROUP_CONFIG)  # fmt: skip
        await client.aclose()


@pytest.mark.trio
async def test_configs_of_a_group_need_its_acls(tmp_path: Path) -> None:
    async with open_broker(tmp_path / "data", SECURED) as broker:
        admin, alice = await as_user(broker, "admin"), await as_user(broker, "alice")
        result = await describe(alice, "team")
        assert result.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert (await alter(alice, "team", ("consumer.session.timeout.ms", SET, "50000")))[0] == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED)  # fmt: skip
        await create_acls(admin, (R.GROUP, "team", PatternType.LITERAL, "User:alice",
                                  Op.DESCRIBE_CONFIGS, Permission.ALLOW))  # fmt: skip
        assert values(await describe(alice, "team"))["consumer.session.timeout.ms"][0] == "45000"
        assert (await alter(alice, "team", ("consumer.session.timeout.ms", SET, "50000")))[0] == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED)  # fmt: skip
        await create_acls(admin, (R.GROUP, "te", PatternType.PREFIXED, "User:alice",
                                  Op.ALTER_CONFIGS, Permission.ALLOW))  # fmt: skip
        assert await alter(alice, "team", ("consumer.session.timeout.ms", SET, "50000")) == (
            0, None)  # fmt: skip
        assert (await describe(alice, "other")).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        for c in (admin, alice):
            await c.aclose()
