"""aiokafka AIOKafkaAdminClient: topics, configs (no incremental API), partitions, records."""

from __future__ import annotations

from typing import Any

import pytest

from compat_tests.aiokafka import ak
from compat_tests.aiokafka.ak import (
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    RecordsToDelete,
    TopicPartition,
    errors,
)
from compat_tests.helpers import by_partition, now_ms, sample_records, topic_name
from strom.broker.testing.embedded import BrokerProcess

# DescribeConfigs config_source values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

TOPIC_ALREADY_EXISTS = 36
INVALID_CONFIG = 40
UNKNOWN_TOPIC_OR_PARTITION = 3


async def wait_for_topics(admin: Any, present: bool, *topics: str) -> None:
    async def check() -> bool:
        return (set(topics) <= set(await admin.list_topics())) == present

    await ak.wait_until(check, f"topics {topics} present={present}")


async def partition_count(admin: Any, topic: str) -> int:
    [described] = await admin.describe_topics([topic])
    assert described["error_code"] == 0, described
    return len(described["partitions"])


def test_create_topic_with_configs_and_describe_it(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-create")

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(
                admin, topic, 3, {"retention.ms": "3600000", "cleanup.policy": "compact"}
            )
            await wait_for_topics(admin, True, topic)
            [described] = await admin.describe_topics([topic])
            assert described["error_code"] == 0
            assert described["topic"] == topic
            assert described["is_internal"] is False
            partitions = sorted(described["partitions"], key=lambda p: p["partition"])
            assert [p["partition"] for p in partitions] == [0, 1, 2]
            for p in partitions:
                assert (p["error_code"], p["leader"], p["replicas"], p["isr"]) == (0, 1, [1], [1])

            configs = await ak.describe_configs(
                admin, ConfigResource(ConfigResourceType.TOPIC, topic)
            )
            assert configs["retention.ms"]["config_value"] == "3600000"
            assert configs["retention.ms"]["config_source"] == DYNAMIC_TOPIC_CONFIG
            assert configs["cleanup.policy"]["config_value"] == "compact"
            assert configs["segment.bytes"]["config_value"] == "1073741824"
            assert configs["segment.bytes"]["config_source"] == DEFAULT_CONFIG

            response = await admin.create_topics([NewTopic(topic, 1, 1)])
            assert ak.topic_errors(response) == {topic: TOPIC_ALREADY_EXISTS}
            bad = topic_name("ak-bad")
            response = await admin.create_topics(
                [NewTopic(bad, 1, 1, topic_configs={"retention.ms": "never"})]
            )
            assert ak.topic_errors(response) == {bad: INVALID_CONFIG}

            dry = topic_name("ak-dry")
            response = await admin.create_topics([NewTopic(dry, 2, 1)], validate_only=True)
            assert ak.topic_errors(response) == {dry: 0}
            assert dry not in await admin.list_topics()

    ak.run(test)


def test_alter_configs_and_broker_configs(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-alter")

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(
                admin, topic, 1, {"retention.ms": "3600000", "cleanup.policy": "compact"}
            )
            resource = ConfigResource(
                ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "300000"}
            )
            assert ak.resource_errors(await admin.alter_configs([resource])) == {topic: 0}
            configs = await ak.describe_configs(
                admin, ConfigResource(ConfigResourceType.TOPIC, topic)
            )
            assert configs["max.message.bytes"]["config_value"] == "300000"
            assert configs["max.message.bytes"]["config_source"] == DYNAMIC_TOPIC_CONFIG
            # AlterConfigs replaces the whole set: what it did not name is back to default
            assert configs["retention.ms"]["config_value"] == "604800000"
            assert configs["retention.ms"]["config_source"] == DEFAULT_CONFIG
            assert configs["cleanup.policy"]["config_value"] == "delete"

            invalid = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "x"})
            assert ak.resource_errors(await admin.alter_configs([invalid])) == {
                topic: INVALID_CONFIG
            }

            broker = await ak.describe_configs(
                admin, ConfigResource(ConfigResourceType.BROKER, "1")
            )
            assert broker["num.partitions"]["config_value"] == "1"
            assert broker["log.dirs"]["config_value"] == str(shared_broker.data_dir)
            assert broker["log.dirs"]["config_source"] == STATIC_BROKER_CONFIG

    ak.run(test)


def test_create_partitions(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-partitions")
    expected = sample_records(4, 5, base_ts=now_ms() - 1000, null_header_values=False)

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(admin, topic, 1)
            response = await admin.create_partitions({topic: NewPartitions(4)})
            [result] = response.to_object()["topic_errors"]
            assert (result["topic"], result["error_code"]) == (topic, 0)

            async def four() -> bool:
                return await partition_count(admin, topic) == 4

            await ak.wait_until(four, "4 partitions")
            with pytest.raises(errors.InvalidPartitionsError):
                await admin.create_partitions({topic: NewPartitions(2)})

        async with ak.producer(bootstrap) as producer:
            await ak.produce_all(producer, topic, expected)
        got = await ak.read_from_start(bootstrap, topic, 4, len(expected))
        assert by_partition(got) == by_partition(expected)

    ak.run(test)


def test_delete_records(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-delete-records")
    expected = sample_records(1, 50, base_ts=now_ms() - 1000, null_header_values=False)
    tp = TopicPartition(topic, 0)

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(admin, topic, 1)
            async with ak.producer(bootstrap) as producer:
                await ak.produce_all(producer, topic, expected)
            assert await admin.delete_records({tp: RecordsToDelete(20)}) == {tp: 20}
            with pytest.raises(errors.OffsetOutOfRangeError):
                await admin.delete_records({tp: RecordsToDelete(51)})
        async with ak.consumer(bootstrap) as consumer:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            assert await ak.consume(consumer, 30) == expected[20:]
            assert await consumer.beginning_offsets([tp]) == {tp: 20}

    ak.run(test)


def test_delete_topics_and_describe_cluster(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("ak-delete")
    host, port = bootstrap.rsplit(":", 1)

    async def test() -> None:
        async with ak.admin(bootstrap) as admin:
            await ak.create_topic(admin, topic, 2)
            await wait_for_topics(admin, True, topic)
            response = await admin.delete_topics([topic])
            assert ak.topic_errors(response) == {topic: 0}
            await wait_for_topics(admin, False, topic)
            response = await admin.delete_topics([topic])
            assert ak.topic_errors(response) == {topic: UNKNOWN_TOPIC_OR_PARTITION}

            cluster = await admin.describe_cluster()
            assert cluster["controller_id"] == 1
            assert cluster["cluster_id"]
            assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
                (1, host, int(port))
            ]

    ak.run(test)
