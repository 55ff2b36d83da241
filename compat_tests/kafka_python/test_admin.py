"""kafka-python KafkaAdminClient: topics, configs, partitions, records, offsets, cluster."""

from __future__ import annotations

from typing import Any

import pytest

from compat_tests.helpers import by_partition, now_ms, sample_records, topic_name, wait_until
from compat_tests.kafka_python import kp
from compat_tests.kafka_python.kp import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    OffsetSpec,
    TopicPartition,
    errors,
)
from strom.broker.testing.embedded import BrokerProcess


def topic_configs(admin: Any, topic: str) -> dict[str, dict[str, Any]]:
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    described = admin.describe_configs([resource], config_filter="all")
    configs: dict[str, dict[str, Any]] = described["topic"][topic]
    return configs


def partition_count(admin: Any, topic: str) -> int | None:
    if topic not in admin.list_topics():
        return None
    [described] = admin.describe_topics([topic])
    return len(described["partitions"])


def test_create_topic_with_configs_and_describe_it(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-create")
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, 3, {"retention.ms": "3600000", "cleanup.policy": "compact"})
        assert (
            wait_until(lambda: partition_count(admin, topic), timeout=kp.TIMEOUT, what=topic) == 3
        )
        [described] = admin.describe_topics([topic])
        assert described["name"] == topic
        assert described["error_code"] == 0
        assert described["is_internal"] is False
        partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
        assert [p["partition_index"] for p in partitions] == [0, 1, 2]
        for p in partitions:
            assert p["error_code"] == 0
            assert p["leader_id"] == 1
            assert p["replica_nodes"] == [1]
            assert p["isr_nodes"] == [1]

        configs = topic_configs(admin, topic)
        assert configs["retention.ms"]["value"] == "3600000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["cleanup.policy"]["value"] == "compact"
        assert configs["segment.bytes"]["value"] == "1073741824"
        assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        # the default filter returns only what was set on the topic
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        modified = admin.describe_configs([resource])["topic"][topic]
        assert set(modified) == {"retention.ms", "cleanup.policy"}

        with pytest.raises(errors.TopicAlreadyExistsError):
            kp.create_topic(admin, topic, 1)
        with pytest.raises(errors.InvalidConfigurationError):
            kp.create_topic(admin, topic_name("kp-bad"), 1, {"retention.ms": "never"})

        dry = topic_name("kp-dry")
        admin.create_topics({dry: {"num_partitions": 2}}, validate_only=True)
        assert dry not in admin.list_topics()


def test_alter_configs_incremental_and_legacy(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-alter")

    def resource_of(configs: Any) -> Any:
        return ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)

    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(
            admin,
            topic,
            1,
            {"retention.ms": "3600000", "cleanup.policy": "delete", "segment.ms": "600000"},
        )
        # IncrementalAlterConfigs: SET, APPEND, DELETE
        admin.alter_configs(
            [
                resource_of(
                    {
                        "retention.ms": (AlterConfigOp.SET, "7200000"),
                        "cleanup.policy": (AlterConfigOp.APPEND, "compact"),
                        "segment.ms": (AlterConfigOp.DELETE, None),
                    }
                )
            ],
            incremental=True,
        )
        configs = topic_configs(admin, topic)
        assert configs["retention.ms"]["value"] == "7200000"
        assert configs["cleanup.policy"]["value"] == "delete,compact"
        assert configs["segment.ms"]["value"] == "604800000"
        assert configs["segment.ms"]["config_source"] == "DEFAULT_CONFIG"

        # reset_configs: IncrementalAlterConfigs DELETE
        admin.reset_configs([resource_of(["cleanup.policy"])])
        assert topic_configs(admin, topic)["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

        # legacy AlterConfigs replaces the whole set; kafka-python re-sends the other modified
        # dynamic keys it reads first with DescribeConfigs, so retention.ms survives
        admin.alter_configs([resource_of({"max.message.bytes": "300000"})], incremental=False)
        configs = topic_configs(admin, topic)
        assert configs["max.message.bytes"]["value"] == "300000"
        assert configs["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["retention.ms"]["value"] == "7200000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

        broker = ConfigResource(ConfigResourceType.BROKER, "1")
        broker_configs = admin.describe_configs([broker], config_filter="all")["broker"]["1"]
        assert broker_configs["num.partitions"]["value"] == "1"
        assert broker_configs["log.dirs"]["value"] == str(shared_broker.data_dir)


def test_create_partitions(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-partitions")
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, 1)
        admin.create_partitions({topic: 4}, timeout_ms=kp.TIMEOUT_MS)
        wait_until(
            lambda: partition_count(admin, topic) == 4, timeout=kp.TIMEOUT, what="4 partitions"
        )
        with pytest.raises(errors.InvalidPartitionsError):
            admin.create_partitions({topic: 2}, timeout_ms=kp.TIMEOUT_MS)

    expected = sample_records(4, 5, base_ts=now_ms() - 1000, null_header_values=False)
    with kp.producer(shared_broker.bootstrap) as producer:
        kp.produce_all(producer, topic, expected)
    with kp.consumer(shared_broker.bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        consumer.seek_to_beginning()
        assert by_partition(kp.consume(consumer, len(expected))) == by_partition(expected)


def test_delete_records_and_list_offsets(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-delete-records")
    base = now_ms() - 600_000
    expected = sample_records(1, 50, base_ts=base, ts_step=1000, null_header_values=False)
    tp = TopicPartition(topic, 0)
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, 1)
        with kp.producer(shared_broker.bootstrap) as producer:
            kp.produce_all(producer, topic, expected)

        offsets = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})
        assert offsets[tp].offset == 0
        offsets = admin.list_partition_offsets({tp: OffsetSpec.LATEST})
        assert offsets[tp].offset == 50
        offsets = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})
        assert (offsets[tp].offset, offsets[tp].timestamp) == (49, base + 49_000)
        offsets = admin.list_partition_offsets({tp: base + 12_500})
        assert (offsets[tp].offset, offsets[tp].timestamp) == (13, base + 13_000)

        deleted = admin.delete_records({tp: 20}, timeout_ms=kp.TIMEOUT_MS)
        assert set(deleted) == {tp}
        assert deleted[tp]["low_watermark"] == 20
        assert admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 20

        with pytest.raises(errors.OffsetOutOfRangeError):
            admin.delete_records({tp: 51}, timeout_ms=kp.TIMEOUT_MS)

    with kp.consumer(shared_broker.bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        assert kp.consume(consumer, 30) == expected[20:]
        assert consumer.beginning_offsets([tp]) == {tp: 20}


def test_delete_topics(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kp-delete")
    with kp.admin(shared_broker.bootstrap) as admin:
        kp.create_topic(admin, topic, 2)
        assert topic in admin.list_topics()
        admin.delete_topics([topic], timeout_ms=kp.TIMEOUT_MS)
        wait_until(
            lambda: topic not in admin.list_topics(), timeout=kp.TIMEOUT, what=f"{topic} deleted"
        )
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.delete_topics([topic], timeout_ms=kp.TIMEOUT_MS)


def test_describe_cluster(shared_broker: BrokerProcess) -> None:
    host, port = shared_broker.bootstrap.rsplit(":", 1)
    with kp.admin(shared_broker.bootstrap) as admin:
        cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert cluster["cluster_id"]
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (1, host, int(port))
    ]
