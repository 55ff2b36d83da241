"""kafka-topics.sh (TopicCommand): create, list, describe, alter partitions, delete."""

from __future__ import annotations

import re

from confluent_kafka.admin import AdminClient

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import topic_name, wait_until
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.embedded import BrokerProcess


def topics_and_partitions(admin: AdminClient) -> dict[str, int]:
    metadata = admin.list_topics(timeout=ck.TIMEOUT)
    return {name: len(t.partitions) for name, t in metadata.topics.items()}


def describe(tools: KafkaTools, broker: BrokerProcess, topic: str) -> list[list[str]]:
    """The describe output as tab-separated fields per line."""
    out = tools.run("kafka-topics", "--bootstrap-server", broker.bootstrap, "--describe",
                    "--topic", topic)  # fmt: skip
    return [line.strip().split("\t") for line in out.lines]


def test_create_list_describe_alter_delete(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess
) -> None:
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    first, second = topic_name("cli-a"), topic_name("cli-b")
    admin = ck.admin(shared_broker.bootstrap)

    created = kafka_tools.run(
        "kafka-topics", *boot, "--create", "--topic", first, "--partitions", "3",
        "--replication-factor", "1", "--config", "retention.ms=123456",
        "--config", "cleanup.policy=compact",
    )  # fmt: skip
    assert created.lines == [f"Created topic {first}."]
    created = kafka_tools.run("kafka-topics", *boot, "--create", "--topic", second)
    assert created.lines == [f"Created topic {second}."]
    assert {first: 3, second: 1}.items() <= topics_and_partitions(admin).items()

    listed = kafka_tools.run("kafka-topics", *boot, "--list")
    assert {first, second} <= set(listed.lines)
    assert listed.lines == sorted(listed.lines)

    header, *partitions = describe(kafka_tools, shared_broker, first)
    assert header[0] == f"Topic: {first}"
    assert re.fullmatch(r"TopicId: [A-Za-z0-9_-]{22}", header[1]), header
    assert header[2:] == [
        "PartitionCount: 3",
        "ReplicationFactor: 1",
        "Configs: cleanup.policy=compact,retention.ms=123456",
    ]
    assert [fields[:5] for fields in partitions] == [
        [f"Topic: {first}", f"Partition: {p}", "Leader: 1", "Replicas: 1", "Isr: 1"]
        for p in range(3)
    ]

    # --alter --partitions grows the topic; the TopicId stays.
    altered = kafka_tools.run("kafka-topics", *boot, "--alter", "--topic", first,
                              "--partitions", "5")  # fmt: skip
    assert altered.lines == []
    header_after, *partitions = describe(kafka_tools, shared_broker, first)
    assert header_after[1] == header[1]
    assert header_after[2] == "PartitionCount: 5"
    assert [fields[1] for fields in partitions] == [f"Partition: {p}" for p in range(5)]
    assert topics_and_partitions(admin)[first] == 5

    deleted = kafka_tools.run("kafka-topics", *boot, "--delete", "--topic", second)
    assert deleted.lines == []
    wait_until(
        lambda: second not in topics_and_partitions(admin), timeout=20, what=f"{second} deleted"
    )
    assert second not in kafka_tools.run("kafka-topics", *boot, "--list").lines


def test_errors_are_reported_with_kafkas_messages(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess
) -> None:
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    topic = topic_name("cli-err")
    kafka_tools.run("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "2")

    again = kafka_tools.run("kafka-topics", *boot, "--create", "--topic", topic, check=False)
    assert again.code == 1
    assert again.lines == [f"Error while executing topic command : Topic '{topic}' already exists."]

    # shrinking is refused by the broker (InvalidPartitionsException)
    shrink = kafka_tools.run("kafka-topics", *boot, "--alter", "--topic", topic,
                             "--partitions", "1", check=False)  # fmt: skip
    assert shrink.code == 1
    assert "InvalidPartitionsException" in shrink.stderr, shrink.describe()

    # one node cannot hold three replicas (InvalidReplicationFactorException)
    too_many = kafka_tools.run(
        "kafka-topics", *boot, "--create", "--topic", topic_name("cli-rf"),
        "--replication-factor", "3", check=False,
    )  # fmt: skip
    assert too_many.code == 1
    assert "InvalidReplicationFactorException" in too_many.stderr, too_many.describe()

    missing = topic_name("cli-missing")
    gone = kafka_tools.run("kafka-topics", *boot, "--delete", "--topic", missing, check=False)
    assert gone.code == 1
    assert gone.lines == [
        f"Error while executing topic command : Topic '{missing}' does not exist as expected"
    ], gone.describe()
    assert topics_and_partitions(ck.admin(shared_broker.bootstrap))[topic] == 2
