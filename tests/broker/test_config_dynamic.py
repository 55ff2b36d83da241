"""The config package's dynamic-config rules, alteration ops and DescribeConfigs entries,
without a broker or controller (they take the stored overrides as plain mappings)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from strom.config import (
    AlterOp,
    BrokerConfig,
    BrokerLayers,
    ConfigResource,
    ConfigSource,
    ConfigType,
    TopicConfig,
    describe_broker_config,
    describe_cluster_defaults,
)
from strom.config.alter_ops import list_altered
from strom.config.broker import BROKER_KEYS
from strom.config.topic import TOPIC_KEYS
from strom.coordinator.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from strom.storage import LogConfig

STATIC = BrokerConfig.from_properties({"log.retention.ms": "1000", "num.partitions": "3"})


def test_the_nodes_own_override_wins_over_the_cluster_default() -> None:
    layers = BrokerLayers(
        STATIC, {"log.retention.ms": "7"}, {"log.retention.ms": "9", "log.segment.bytes": "5000"}
    )
    effective = layers.effective()
    assert (effective.log_retention_ms, effective.log_segment_bytes) == (7, 5000)
    assert effective.num_partitions == 3


def test_only_dynamic_keys_take_effect_and_invalid_stored_values_are_ignored() -> None:
    assert BrokerLayers(STATIC, {"num.partitions": "9", "custom.thing": "1"}, {}).effective() == (
        STATIC
    )
    assert BrokerLayers(STATIC, {"log.retention.ms": "soon"}, {}).effective() is STATIC
    assert BrokerLayers(STATIC, {}, {}).effective() is STATIC


def test_refusals_name_what_kafka_names() -> None:
    layers = BrokerLayers(STATIC, {}, {})
    assert layers.refusal({"log.retention.ms": "5"}, per_broker=False) is None
    assert layers.refusal({"num.partitions": "2", "node.id": "3"}, per_broker=True) == (
        "Cannot update these configs dynamically: Set(node.id, num.partitions)"
    )
    # listeners are read-only until Strom can rebind at runtime (a change would be stored and
    # reported, never applied); advertised.listeners is read-only in Kafka 4
    for key in ("listeners", "advertised.listeners", "listener.security.protocol.map"):
        for per_broker in (True, False):
            assert layers.refusal({key: "PLAINTEXT://:0"}, per_broker=per_broker) == (
                f"Cannot update these configs dynamically: Set({key})"
            )
    refusal = layers.refusal({"log.retention.ms": "x"}, per_broker=True)
    assert refusal is not None
    assert "log.retention.ms" in refusal
    # read once at start (loggers change at runtime through broker-loggers), so refused rather
    # than stored and never applied
    assert layers.refusal({"strom.log.level": "DEBUG"}, per_broker=True) == (
        "Cannot update these configs dynamically: Set(strom.log.level)"
    )


def test_a_change_is_vetted_with_the_other_layer_in_place() -> None:
    """min.compaction.lag > max.compaction.lag only once both layers are combined."""
    per_node = BrokerLayers(STATIC, {"log.cleaner.max.compaction.lag.ms": "10"}, {})
    assert per_node.refusal({"log.cleaner.min.compaction.lag.ms": "20"}, per_broker=False)
    cluster = BrokerLayers(STATIC, {}, {"log.cleaner.max.compaction.lag.ms": "10"})
    assert cluster.refusal({"log.cleaner.min.compaction.lag.ms": "20"}, per_broker=True)
    assert cluster.refusal({"log.cleaner.min.compaction.lag.ms": "5"}, per_broker=True) is None


def test_append_and_subtract_start_from_the_stored_value_or_the_default() -> None:
    policy = TOPIC_KEYS["cleanup.policy"]
    assert list_altered(policy, AlterOp.APPEND, None, "compact") == "delete,compact"
    assert list_altered(policy, AlterOp.APPEND, "compact", "compact,delete") == "compact,delete"
    assert list_altered(policy, AlterOp.SUBTRACT, None, "delete") == ""
    assert list_altered(policy, AlterOp.SUBTRACT, "compact,delete", "compact") == "delete"


def test_cluster_defaults_show_their_raw_stored_values() -> None:
    defaults = {"log.retention.ms": "5", "log.retention.minutes": "1", "custom.thing": "x"}
    entries = {e.name: e for e in describe_cluster_defaults(defaults)}
    assert list(entries) == ["custom.thing", "log.retention.minutes", "log.retention.ms"]
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source, retention.read_only) == (
        "5",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        False,
    )
    assert [(s.name, s.value) for s in retention.synonyms] == [
        ("log.retention.ms", "5"),
        ("log.retention.minutes", "1"),
    ]
    unknown = entries["custom.thing"]
    assert (unknown.value, unknown.config_type, unknown.is_sensitive, unknown.read_only) == (
        None,
        ConfigType.UNKNOWN,
        True,
        True,
    )
    assert [e.name for e in describe_cluster_defaults(defaults, ["log.retention.ms"])] == [
        "log.retention.ms"
    ]


def test_broker_entries_list_unknown_stored_keys_only_with_layers() -> None:
    layers = BrokerLayers(STATIC, {"zz.custom": "1"}, {"aa.custom": "2", "zz.custom": "3"})
    entries = describe_broker_config(layers.effective(), layers=layers)
    names = [e.name for e in entries]
    assert names == sorted([*BROKER_KEYS, "aa.custom", "zz.custom"])
    mine = entries[names.index("zz.custom")]
    assert [s.source for s in mine.synonyms] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ]
    assert "aa.custom" not in [e.name for e in describe_broker_config(STATIC)]
    only = describe_broker_config(STATIC, ["aa.custom", "node.id"], layers=layers)
    assert [e.name for e in only] == ["aa.custom", "node.id"]


def test_log_config_defaults_are_the_topic_keys_defaults() -> None:
    defaults = TopicConfig()
    for field in dataclasses.fields(LogConfig):
        assert getattr(LogConfig(), field.name) == getattr(defaults, field.name), field.name


@pytest.mark.parametrize(
    ("key", "value"),
    [("segment_bytes", 13), ("segment_ms", 0), ("segment_index_bytes", 3)],
)
def test_log_config_refuses_what_the_log_cannot_run_with(key: str, value: int) -> None:
    overrides: dict[str, Any] = {key: value}
    with pytest.raises(ValueError, match=key.replace("_", ".")):
        LogConfig(**overrides)


def test_resource_ids_are_kafkas() -> None:
    assert (TOPIC_RESOURCE, BROKER_RESOURCE) == (2, 4)
    assert [int(r) for r in ConfigResource] == [0, 2, 4, 8, 16, 32]
