"""confluent-kafka AdminClient: topics, configs, partitions, records, cluster."""

from __future__ import annotations

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.ck import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from compat_tests.helpers import by_partition, now_ms, sample_records, topic_name, wait_until
from strom.broker.testing.embedded import BrokerProcess


def describe_topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = admin.describe_configs([resource], request_timeout=ck.TIMEOUT)
    [(_, future)] = futures.items()
    configs: dict[str, ConfigEntry] = ck.result(future)
    return configs


def partition_count(admin: AdminClient, topic: str) -> int | None:
    # all topics: a Metadata request naming the topic would auto-create it (the admin client
    # is a librdkafka producer, whose allow.auto.create.topics defaults to true)
    metadata = admin.list_topics(timeout=ck.TIMEOUT)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


def test_create_topic_with_configs_and_describe_it(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("ck-create")
    ck.create_topic(
        admin,
        topic,
        3,
        {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "200000"},
    )
    assert wait_until(lambda: partition_count(admin, topic), timeout=ck.TIMEOUT, what=topic) == 3

    [(name, future)] = admin.describe_topics(
        TopicCollection([topic]), request_timeout=ck.TIMEOUT
    ).items()
    description = ck.result(future)
    assert name == topic
    assert description.name == topic
    assert not description.is_internal
    assert description.topic_id is not None
    assert [p.id for p in description.partitions] == [0, 1, 2]
    for p in description.partitions:
        assert p.leader is not None
        assert p.leader.id == 1
        assert [r.id for r in p.replicas] == [1]
        assert [r.id for r in p.isr] == [1]

    configs = describe_topic_configs(admin, topic)
    for key, value in [
        ("retention.ms", "3600000"),
        ("cleanup.policy", "compact"),
        ("max.message.bytes", "200000"),
    ]:
        entry = configs[key]
        assert entry.value == value, key
        assert ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG, key
        assert not entry.is_default, key
    segment = configs["segment.bytes"]
    assert segment.value == "1073741824"
    assert ConfigSource(segment.source) == ConfigSource.DEFAULT_CONFIG
    assert segment.is_default


def test_create_topic_errors(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("ck-exists")
    ck.create_topic(admin, topic, 1)

    def create_error(new: NewTopic, validate_only: bool = False) -> int:
        futures = admin.create_topics(
            [new], operation_timeout=ck.TIMEOUT, validate_only=validate_only
        )
        with pytest.raises(KafkaException) as info:
            ck.result(futures[new.topic])
        return ck.error_code(info.value)

    assert create_error(NewTopic(topic, 1)) == KafkaError.TOPIC_ALREADY_EXISTS
    bad_config = NewTopic(topic_name("ck-bad"), 1, config={"retention.ms": "not-a-number"})
    assert create_error(bad_config) == KafkaError.INVALID_CONFIG
    unknown = NewTopic(topic_name("ck-bad"), 1, config={"no.such.config": "1"})
    assert create_error(unknown) == KafkaError.INVALID_CONFIG

    # validate_only: accepted, but nothing is created
    dry = topic_name("ck-dry")
    futures = admin.create_topics([NewTopic(dry, 2)], validate_only=True)
    assert ck.result(futures[dry]) is None
    assert partition_count(admin, dry) is None


def test_incremental_alter_configs(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("ck-incremental")
    ck.create_topic(
        admin,
        topic,
        1,
        {"retention.ms": "3600000", "cleanup.policy": "delete", "segment.ms": "600000"},
    )
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry(
                "min.compaction.lag.ms", "5000", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    [(_, future)] = admin.incremental_alter_configs([resource], request_timeout=ck.TIMEOUT).items()
    assert ck.result(future) is None

    configs = describe_topic_configs(admin, topic)
    assert configs["retention.ms"].value == "7200000"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["min.compaction.lag.ms"].value == "5000"
    assert (
        ConfigSource(configs["min.compaction.lag.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    )
    assert configs["segment.ms"].value == "604800000"
    assert ConfigSource(configs["segment.ms"].source) == ConfigSource.DEFAULT_CONFIG

    subtract = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT
            )
        ],
    )
    [(_, future)] = admin.incremental_alter_configs([subtract], request_timeout=ck.TIMEOUT).items()
    assert ck.result(future) is None
    assert describe_topic_configs(admin, topic)["cleanup.policy"].value == "compact"

    invalid = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [(_, future)] = admin.incremental_alter_configs([invalid], request_timeout=ck.TIMEOUT).items()
    with pytest.raises(KafkaException) as info:
        ck.result(future)
    assert ck.error_code(info.value) == KafkaError.INVALID_CONFIG
    assert describe_topic_configs(admin, topic)["retention.ms"].value == "7200000"


def test_legacy_alter_configs_replaces_the_whole_set(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("ck-alter")
    ck.create_topic(admin, topic, 1, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "1000000"})
    with pytest.warns(DeprecationWarning, match="alter_configs has been deprecated"):
        futures = admin.alter_configs([resource], request_timeout=ck.TIMEOUT)
    [(_, future)] = futures.items()
    assert ck.result(future) is None
    configs = describe_topic_configs(admin, topic)
    assert configs["retention.ms"].value == "1000000"
    assert ConfigSource(configs["retention.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "delete"  # not named: back to the default
    assert ConfigSource(configs["cleanup.policy"].source) == ConfigSource.DEFAULT_CONFIG


def test_broker_configs(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    resource = ConfigResource(ResourceType.BROKER, "1")
    [(_, future)] = admin.describe_configs([resource], request_timeout=ck.TIMEOUT).items()
    configs: dict[str, ConfigEntry] = ck.result(future)
    assert configs["num.partitions"].value == "1"
    assert configs["log.dirs"].value == str(shared_broker.data_dir)
    assert ConfigSource(configs["log.dirs"].source) == ConfigSource.STATIC_BROKER_CONFIG
    assert configs["log.retention.hours"].value == "168"

    change = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [(_, future)] = admin.incremental_alter_configs([change], request_timeout=ck.TIMEOUT).items()
    assert ck.result(future) is None
    [(_, future)] = admin.describe_configs([resource], request_timeout=ck.TIMEOUT).items()
    configs = ck.result(future)
    assert configs["log.retention.ms"].value == "86400000"
    assert ConfigSource(configs["log.retention.ms"].source) == ConfigSource.DYNAMIC_BROKER_CONFIG


def test_create_partitions(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("ck-partitions")
    ck.create_topic(admin, topic, 2)
    futures = admin.create_partitions([NewPartitions(topic, 5)], operation_timeout=ck.TIMEOUT)
    assert ck.result(futures[topic]) is None
    wait_until(lambda: partition_count(admin, topic) == 5, timeout=ck.TIMEOUT, what="5 partitions")

    expected = sample_records(5, 4, base_ts=now_ms() - 1000)
    ck.produce_all(ck.producer(shared_broker.bootstrap), topic, expected)
    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(5)])
        assert by_partition(ck.consume(consumer, len(expected))) == by_partition(expected)
    finally:
        consumer.close()

    futures = admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=ck.TIMEOUT)
    with pytest.raises(KafkaException) as info:
        ck.result(futures[topic])
    assert ck.error_code(info.value) == KafkaError.INVALID_PARTITIONS
    assert partition_count(admin, topic) == 5


def test_delete_records(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("ck-delete-records")
    ck.create_topic(admin, topic, 2)
    expected = sample_records(2, 50, base_ts=now_ms() - 1000)
    ck.produce_all(ck.producer(shared_broker.bootstrap), topic, expected)

    futures = admin.delete_records(
        [TopicPartition(topic, 0, 20), TopicPartition(topic, 1, OFFSET_END)],
        request_timeout=ck.TIMEOUT,
        operation_timeout=ck.TIMEOUT,
    )
    lows = {tp.partition: ck.result(f).low_watermark for tp, f in futures.items()}
    assert lows == {0: 20, 1: 50}

    tp0 = TopicPartition(topic, 0)
    [(_, future)] = admin.list_offsets({tp0: ck.offset_spec("earliest")}).items()
    assert ck.result(future).offset == 20

    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        assert ck.watermarks(consumer, topic, 0) == (20, 50)
        assert ck.watermarks(consumer, topic, 1) == (50, 50)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert ck.consume(consumer, 30) == by_partition(expected)[0][20:]
    finally:
        consumer.close()

    # beyond the high watermark
    futures = admin.delete_records([TopicPartition(topic, 0, 51)], request_timeout=ck.TIMEOUT)
    [(_, future)] = futures.items()
    with pytest.raises(KafkaException) as info:
        ck.result(future)
    assert ck.error_code(info.value) == KafkaError.OFFSET_OUT_OF_RANGE


def test_delete_topics(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("ck-delete")
    ck.create_topic(admin, topic, 2)
    futures = admin.delete_topics([topic], operation_timeout=ck.TIMEOUT)
    assert ck.result(futures[topic]) is None
    wait_until(
        lambda: topic not in admin.list_topics(timeout=ck.TIMEOUT).topics,
        timeout=ck.TIMEOUT,
        what=f"{topic} to disappear",
    )

    futures = admin.delete_topics([topic], operation_timeout=ck.TIMEOUT)
    with pytest.raises(KafkaException) as info:
        ck.result(futures[topic])
    assert ck.error_code(info.value) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # the name can be used again, for a fresh topic
    ck.create_topic(admin, topic, 1)
    assert wait_until(lambda: partition_count(admin, topic), timeout=ck.TIMEOUT, what=topic) == 1


def test_describe_cluster(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    cluster = ck.result(admin.describe_cluster(request_timeout=ck.TIMEOUT))
    host, port = shared_broker.bootstrap.rsplit(":", 1)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, host, int(port))]
    assert cluster.controller is not None
    assert cluster.controller.id == 1
    assert cluster.cluster_id
    assert cluster.cluster_id == admin.list_topics(timeout=ck.TIMEOUT).cluster_id
