"""kafka-python's KafkaAdminClient, unmodified, against a `strom serve` child process.

kafka-python is synchronous, so the broker runs in its own process
(`strom.broker.testing.embedded.BrokerProcess`). The client picks the newest version of each
admin API both sides support, so this also checks what ApiVersions advertises.
"""

from __future__ import annotations

import subprocess
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.broker.testing.embedded import BrokerProcess

with warnings.catch_warnings():  # kafka-python loads its schemas through a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
    from kafka.errors import (
        InvalidConfigurationError,
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
    )


class _Broker(BrokerProcess):
    """Closes the child's stderr pipe once drained (BrokerProcess leaves it open: a
    ResourceWarning, an error in this suite, whenever the Popen is collected)."""

    def _drain(self, process: subprocess.Popen[str], ready: threading.Event) -> None:
        try:
            super()._drain(process, ready)
        finally:
            if process.stderr is not None:
                process.stderr.close()


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaAdminClient]:
    data: Path = tmp_path_factory.mktemp("kafka-python-admin")
    with _Broker(data) as broker:
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        try:
            yield client
        finally:
            client.close()


def topic_configs(admin: KafkaAdminClient, topic: str) -> dict[str, dict[str, Any]]:
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    configs: dict[str, dict[str, Any]] = admin.describe_configs([resource], config_filter="all")[
        "topic"
    ][topic]
    return configs


def partition_count(admin: KafkaAdminClient, topic: str) -> int:
    [described] = admin.describe_topics([topic])
    return len(described["partitions"])


def test_create_and_describe(admin: KafkaAdminClient) -> None:
    result = admin.create_topics(
        {
            "kp-a": {
                "num_partitions": 3,
                "replication_factor": 1,
                "configs": {"retention.ms": "3600000"},
            }
        }
    )
    [created] = result["topics"]
    assert (created["name"], created["error_code"], created["num_partitions"]) == ("kp-a", 0, 3)
    assert created["configs"]["retention.ms"]["value"] == "3600000"
    assert "kp-a" in admin.list_topics()
    assert partition_count(admin, "kp-a") == 3
    configs = topic_configs(admin, "kp-a")
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["config_source"]) == (
        "3600000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["cleanup.policy"]["config_type"] == "LIST"


def test_create_errors(admin: KafkaAdminClient) -> None:
    admin.create_topics(["kp-exists"])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics(["kp-exists"])
    with pytest.raises(InvalidConfigurationError):
        admin.create_topics({"kp-bad": {"configs": {"retention.ms": "soon"}}})
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics({"kp-rf": {"num_partitions": 1, "replication_factor": 3}})
    admin.create_topics(["kp-validated"], validate_only=True)
    assert "kp-validated" not in admin.list_topics()


def test_describe_broker_configs(admin: KafkaAdminClient) -> None:
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True, config_filter="all"
    )
    configs = described["broker"]["1"]
    assert configs["node.id"]["value"] == "1"
    assert configs["num.partitions"]["read_only"] is True
    assert configs["message.max.bytes"]["read_only"] is False


def test_alter_configs(admin: KafkaAdminClient) -> None:
    admin.create_topics(["kp-alter"])
    resource = ConfigResource(
        ConfigResourceType.TOPIC,
        "kp-alter",
        {"retention.ms": "1234567", "cleanup.policy": (AlterConfigOp.APPEND, "compact")},
    )
    assert admin.alter_configs([resource]) == {"topic": {"kp-alter": "OK"}}
    configs = topic_configs(admin, "kp-alter")
    assert configs["retention.ms"]["value"] == "1234567"
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    # the legacy API too: it replaces the whole set (the client re-sends the other changes)
    legacy = ConfigResource(ConfigResourceType.TOPIC, "kp-alter", {"max.message.bytes": "4096"})
    assert admin.alter_configs([legacy], incremental=False) == {"topic": {"kp-alter": "OK"}}
    configs = topic_configs(admin, "kp-alter")
    assert configs["max.message.bytes"]["value"] == "4096"
    assert configs["retention.ms"]["value"] == "1234567"
    reset = ConfigResource(ConfigResourceType.TOPIC, "kp-alter", ["retention.ms"])
    admin.reset_configs([reset])
    assert topic_configs(admin, "kp-alter")["retention.ms"]["config_source"] == "DEFAULT_CONFIG"


def test_create_partitions(admin: KafkaAdminClient) -> None:
    admin.create_topics({"kp-grow": {"num_partitions": 1}})
    admin.create_partitions({"kp-grow": 4})
    assert partition_count(admin, "kp-grow") == 4
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kp-grow": 2})
    admin.create_partitions({"kp-grow": 6}, validate_only=True)
    assert partition_count(admin, "kp-grow") == 4


def test_delete_topics(admin: KafkaAdminClient) -> None:
    admin.create_topics(["kp-gone"])
    admin.delete_topics(["kp-gone"])
    assert "kp-gone" not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["kp-gone"])


def test_describe_cluster(admin: KafkaAdminClient) -> None:
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [b["broker_id"] for b in cluster["brokers"]] == [1]
    assert cluster["cluster_id"]
