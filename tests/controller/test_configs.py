"""IncrementalAlterConfigs and AlterConfigs on topic and broker resources."""

from __future__ import annotations

import pytest

from strom.config import ConfigSource
from strom.coordinator.controller import Controller
from strom.coordinator.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.config_record import ConfigRecord
from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from tests.controller.helpers import commit, create, make_controller, topic

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
Inc = IncrementalAlterConfigsRequest
Legacy = AlterConfigsRequest


def _controller() -> Controller:
    controller = make_controller()
    create(controller, topic("t", configs={"retention.ms": "100", "cleanup.policy": "delete"}))
    return controller


def _inc(
    rtype: int, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False
) -> IncrementalAlterConfigsRequest:
    configs = [Inc.AlterableConfig(k, op, v) for k, op, v in ops]
    return Inc(
        resources=[Inc.AlterConfigsResource(rtype, name, configs)], validate_only=validate_only
    )


def _legacy(rtype: int, name: str, **values: str | None) -> AlterConfigsRequest:
    configs = [Legacy.AlterableConfig(k.replace("_", "."), v) for k, v in values.items()]
    return Legacy(resources=[Legacy.AlterConfigsResource(rtype, name, configs)])


def _one(
    response: IncrementalAlterConfigsResponse | AlterConfigsResponse,
) -> tuple[int, str | None]:
    (entry,) = response.responses
    return entry.error_code, entry.error_message


def test_incremental_set_delete_append_subtract_on_topic() -> None:
    controller = _controller()
    request = _inc(
        TOPIC_RESOURCE, "t",
        ("retention.ms", SET, "200"),
        ("cleanup.policy", APPEND, "compact"),
        ("segment.ms", DELETE, None),
        ("follower.replication.throttled.replicas", APPEND, "0:1,1:1"),
    )  # fmt: skip
    result = controller.incremental_alter_configs(request, 1)
    assert _one(result.response) == (0, None)
    # segment.ms had no override: deleting it changes nothing, so no record
    assert [(r.name, r.value) for r in result.records] == [  # type: ignore[attr-defined]
        ("retention.ms", "200"),
        ("cleanup.policy", "delete,compact"),
        ("follower.replication.throttled.replicas", "0:1,1:1"),
    ]
    commit(controller, result)
    request = _inc(
        TOPIC_RESOURCE, "t", ("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None)
    )
    commit(controller, controller.incremental_alter_configs(request, 0))
    assert controller.image.topic_config_overrides("t") == {
        "cleanup.policy": "compact",
        "follower.replication.throttled.replicas": "0:1,1:1",
    }


def test_append_uses_default_when_unset() -> None:
    controller = make_controller()
    create(controller, topic("u"))
    result = controller.incremental_alter_configs(
        _inc(TOPIC_RESOURCE, "u", ("cleanup.policy", APPEND, "compact")), 1
    )
    assert [(r.name, r.value) for r in result.records] == [("cleanup.policy", "delete,compact")]  # type: ignore[attr-defined]


def test_unchanged_topic_value_writes_no_record() -> None:
    controller = _controller()
    result = controller.incremental_alter_configs(
        _inc(TOPIC_RESOURCE, "t", ("retention.ms", SET, "100")), 1
    )
    assert (result.records, _one(result.response)[0]) == ([], 0)


def test_validate_only() -> None:
    controller = _controller()
    request = _inc(TOPIC_RESOURCE, "t", ("retention.ms", SET, "5"), validate_only=True)
    result = controller.incremental_alter_configs(request, 1)
    assert (result.records, _one(result.response)[0]) == ([], 0)


@pytest.mark.parametrize(
    ("name", "ops", "code", "message"),
    [
        ("t", [("retention.ms", APPEND, "1")], ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."),
        ("t", [("nope", SUBTRACT, "1")], ErrorCode.INVALID_CONFIG, "Can't SUBTRACT to key nope because its type is not LIST."),
        ("t", [("nope", SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown topic config name: nope"),
        ("t", [("retention.ms", SET, "x")], ErrorCode.INVALID_CONFIG, None),
        ("t", [("retention.ms", SET, None)], ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        ("t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
        ("t", [("retention.ms", 9, "1")], ErrorCode.INVALID_REQUEST, "Unknown operations type 9"),
        ("missing", [("retention.ms", SET, "1")], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
        ("", [("retention.ms", SET, "1")], ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."),
        ("bad/name", [("retention.ms", SET, "1")], ErrorCode.INVALID_TOPIC_EXCEPTION, None),
    ],
)  # fmt: skip
def test_incremental_topic_errors(
    name: str, ops: list[tuple[str, int, str | None]], code: int, message: str | None
) -> None:
    controller = _controller()
    result = controller.incremental_alter_configs(_inc(TOPIC_RESOURCE, name, *ops), 1)
    got_code, got_message = _one(result.response)
    assert (result.records, got_code) == ([], code)
    if message is not None:
        assert got_message == message
    else:
        assert got_message


def test_duplicate_resources_fail_both_and_others_apply() -> None:
    controller = _controller()
    create(controller, topic("u"))
    resource = Inc.AlterConfigsResource
    request = Inc(
        resources=[
            resource(TOPIC_RESOURCE, "t", [Inc.AlterableConfig("retention.ms", SET, "1")]),
            resource(TOPIC_RESOURCE, "u", [Inc.AlterableConfig("retention.ms", SET, "2")]),
            resource(TOPIC_RESOURCE, "t", [Inc.AlterableConfig("retention.ms", SET, "3")]),
        ]
    )
    result = controller.incremental_alter_configs(request, 1)
    rows = [(r.resource_name, r.error_code, r.error_message) for r in result.response.responses]
    assert rows == [
        ("t", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
        ("u", 0, None),
        ("t", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
    ]
    assert [r.resource_name for r in result.records] == ["u"]  # type: ignore[attr-defined]
    IncrementalAlterConfigsResponse.decode(result.response.encode(1), 1)


def test_broker_configs_cluster_default_and_per_node() -> None:
    controller = make_controller()
    request = _inc(BROKER_RESOURCE, "", ("log.retention.ms", SET, "1234"))
    result = controller.incremental_alter_configs(request, 1)
    assert _one(result.response) == (0, None)
    commit(controller, result)
    commit(
        controller,
        controller.incremental_alter_configs(
            _inc(BROKER_RESOURCE, "1", ("log.retention.ms", SET, "99")), 1
        ),
    )
    image = controller.image
    assert image.broker_config_overrides() == {"log.retention.ms": "1234"}
    assert image.broker_config_overrides(1) == {"log.retention.ms": "99"}
    # new topics see the dynamic value, reported with its dynamic source
    (entry,) = create(controller, topic("n")).topics
    retention = next(c for c in entry.configs or [] if c.name == "retention.ms")
    assert (retention.value, retention.config_source) == ("99", ConfigSource.DYNAMIC_BROKER_CONFIG)


def test_broker_records_even_when_unchanged() -> None:
    controller = make_controller()
    request = _inc(
        BROKER_RESOURCE, "", ("log.retention.ms", SET, "5"), ("nothing.here", DELETE, None)
    )
    commit(controller, controller.incremental_alter_configs(request, 1))
    again = controller.incremental_alter_configs(request, 1)
    assert [(r.name, r.value) for r in again.records] == [  # type: ignore[attr-defined]
        ("log.retention.ms", "5"),
        ("nothing.here", None),
    ]


@pytest.mark.parametrize(
    ("name", "ops", "code", "message"),
    [
        ("2", [("log.retention.ms", SET, "1")], ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
        ("x", [("log.retention.ms", SET, "1")], ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: x"),
        ("", [("node.id", SET, "3")], ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(node.id)"),
        ("", [("listeners", SET, "PLAINTEXT://:1")], ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(listeners)"),
        ("1", [("listeners", SET, "PLAINTEXT://:1")], ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(listeners)"),
        ("1", [("advertised.listeners", SET, "PLAINTEXT://h:1")], ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(advertised.listeners)"),
        ("1", [("log.retention.ms", SET, "abc")], ErrorCode.INVALID_REQUEST, None),
        ("1", [("log.retention.ms", APPEND, "1")], ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms"),
    ],
)  # fmt: skip
def test_broker_errors(
    name: str, ops: list[tuple[str, int, str | None]], code: int, message: str | None
) -> None:
    result = make_controller().incremental_alter_configs(_inc(BROKER_RESOURCE, name, *ops), 1)
    got_code, got_message = _one(result.response)
    assert (result.records, got_code) == ([], code)
    assert got_message == message if message is not None else got_message


def test_unknown_broker_keys_are_stored() -> None:
    controller = make_controller()
    commit(
        controller,
        controller.incremental_alter_configs(
            _inc(BROKER_RESOURCE, "", ("custom.thing", SET, "1")), 1
        ),
    )
    assert controller.image.broker_config_overrides() == {"custom.thing": "1"}


def test_unsupported_resource_type() -> None:
    result = make_controller().incremental_alter_configs(_inc(8, "1", ("x", SET, "1")), 1)
    assert _one(result.response)[0] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_replaces_the_whole_set(version: int) -> None:
    controller = _controller()
    result = controller.alter_configs(
        _legacy(TOPIC_RESOURCE, "t", segment_ms="1000", retention_ms="100"), version
    )
    assert _one(result.response) == (0, None)
    # retention.ms unchanged: no record; cleanup.policy omitted: deleted
    assert result.records == [
        ConfigRecord(TOPIC_RESOURCE, "t", "segment.ms", "1000"),
        ConfigRecord(TOPIC_RESOURCE, "t", "cleanup.policy", None),
    ]
    AlterConfigsResponse.decode(result.response.encode(version), version)
    commit(controller, result)
    assert controller.image.topic_config_overrides("t") == {
        "segment.ms": "1000",
        "retention.ms": "100",
    }


@pytest.mark.parametrize(
    ("rtype", "name", "values", "code"),
    [
        (TOPIC_RESOURCE, "t", {"retention_ms": None}, ErrorCode.INVALID_REQUEST),
        (TOPIC_RESOURCE, "t", {"bogus": "1"}, ErrorCode.INVALID_CONFIG),
        (TOPIC_RESOURCE, "gone", {"retention_ms": "1"}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (BROKER_RESOURCE, "7", {"log_retention_ms": "1"}, ErrorCode.INVALID_REQUEST),
        (BROKER_RESOURCE, "", {"log_dir": "/x"}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_alter_configs_errors(
    rtype: int, name: str, values: dict[str, str | None], code: int
) -> None:
    result = _controller().alter_configs(_legacy(rtype, name, **values), 1)
    assert (result.records, _one(result.response)[0]) == ([], code)


def test_alter_configs_broker_rewrites_all_keys() -> None:
    controller = make_controller()
    commit(
        controller,
        controller.alter_configs(
            _legacy(BROKER_RESOURCE, "1", log_retention_ms="5", log_segment_ms="7"), 1
        ),
    )
    result = controller.alter_configs(_legacy(BROKER_RESOURCE, "1", log_retention_ms="5"), 1)
    assert result.records == [
        ConfigRecord(BROKER_RESOURCE, "1", "log.retention.ms", "5"),
        ConfigRecord(BROKER_RESOURCE, "1", "log.segment.ms", None),
    ]
