"""The image's environment-to-configuration mapping (apache/kafka's rules), without a container."""

from __future__ import annotations

import pytest

from strom.broker.process.container import (
    DEFAULT_CLUSTER_ID,
    DEFAULT_LOG_DIRS,
    ContainerConfigError,
    container_properties,
    env_properties,
    property_name,
)
from strom.config import load_config

TESTCONTAINERS_ENV = {
    # what Testcontainers' KafkaContainer sets for apache/kafka (plus the advertised listeners
    # its start script exports)
    "CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw",
    "KAFKA_LISTENERS": "PLAINTEXT://:9092,BROKER://:9093,CONTROLLER://:9094",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "KAFKA_INTER_BROKER_LISTENER_NAME": "BROKER",
    "KAFKA_PROCESS_ROLES": "broker,controller",
    "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
    "KAFKA_NODE_ID": "1",
    "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
    "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "1",
    "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
    "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
    "KAFKA_LOG_FLUSH_INTERVAL_MESSAGES": "9223372036854775807",
    "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:32789,BROKER://a1b2c3:9093",
}


@pytest.mark.parametrize(
    ("variable", "key"),
    [
        ("KAFKA_NODE_ID", "node.id"),
        ("KAFKA_CONTROLLER_QUORUM_VOTERS", "controller.quorum.voters"),
        ("KAFKA_VALID___PROPERTY__ALL_CASES", "valid-property_all.cases"),
        ("KAFKA_METRICS_LISTENER", "metrics.listener"),
    ],
)
def test_property_names_follow_apache_kafkas_image(variable: str, key: str) -> None:
    assert property_name(variable) == key


def test_jvm_and_log4j_variables_and_others_are_not_properties() -> None:
    env = {"KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_OPTS": "-Dx", "KAFKA_JMX_PORT": "9999",
           "KAFKA_LOG4J_LOGGERS": "kafka=INFO", "PATH": "/bin", "KAFKA_NUM_PARTITIONS": "3"}  # fmt: skip
    assert env_properties(env) == {"num.partitions": "3"}


def test_testcontainers_environment_gives_a_configuration_strom_accepts() -> None:
    properties, cluster_id = container_properties(TESTCONTAINERS_ENV)
    assert cluster_id == "4L6g3nShT-eMCtK--X86sw"
    assert properties["listeners"] == "PLAINTEXT://:9092,BROKER://:9093,CONTROLLER://:9094"
    assert properties["advertised.listeners"] == "PLAINTEXT://localhost:32789,BROKER://a1b2c3:9093"
    assert properties["log.dirs"] == DEFAULT_LOG_DIRS
    config = load_config(extra=properties)
    assert config.node_id == 1
    assert config.controller_listeners == ("CONTROLLER",)


def test_listeners_derive_from_advertised_ones() -> None:
    properties, cluster_id = container_properties({
        "KAFKA_PROCESS_ROLES": "broker,controller", "KAFKA_NODE_ID": "2",
        "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka-2:9092,EXTERNAL://localhost:29092",
    })  # fmt: skip
    assert properties["listeners"] == "PLAINTEXT://0.0.0.0:9092,EXTERNAL://0.0.0.0:29092"
    assert cluster_id == DEFAULT_CLUSTER_ID


def test_a_controller_refuses_advertised_listeners() -> None:
    with pytest.raises(ContainerConfigError, match="not supported on a KRaft controller"):
        container_properties({"KAFKA_PROCESS_ROLES": "controller",
                              "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://x:9092"})  # fmt: skip
    properties, _ = container_properties({"KAFKA_PROCESS_ROLES": "controller",
                                          "KAFKA_LISTENERS": "CONTROLLER://:9093"})  # fmt: skip
    assert "advertised.listeners" not in properties


def test_a_mounted_file_is_the_base_and_the_defaults_apply_only_without_anything() -> None:
    mounted = {"num.partitions": "6", "log.dirs": "/data"}
    properties, _ = container_properties({"KAFKA_NUM_PARTITIONS": "12"}, mounted, {"x": "1"})
    assert properties == {"num.partitions": "12", "log.dirs": "/data"}
    properties, _ = container_properties({}, None, {"node.id": "1", "log.dirs": "/tmp/d"})
    assert properties == {"node.id": "1", "log.dirs": "/tmp/d"}


def test_log4j_root_level_sets_stroms_log_level() -> None:
    properties, _ = container_properties(
        {"KAFKA_LOG4J_ROOT_LOGLEVEL": "warn", "KAFKA_NODE_ID": "1"}
    )
    assert properties["strom.log.level"] == "WARN"
    with pytest.raises(ContainerConfigError, match="not a log level"):
        container_properties({"KAFKA_LOG4J_ROOT_LOGLEVEL": "LOUD"})
