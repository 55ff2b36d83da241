"""kafka-console-producer.sh and kafka-console-consumer.sh: exact records both ways."""

from __future__ import annotations

import subprocess

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Rec, topic_name, wait_until
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.embedded import BrokerProcess

PRODUCER_INPUT = [
    # headers \t key::value, as LineMessageReader parses them with these properties
    "trace:abc,dup:1\tuser-1::first value, with spaces",
    "dup:2\tuser-2::NULL",  # null.marker: a tombstone
    "gone:NULL\tNULL::no key::but separators in the value",  # null key, null header value
    "lang:da\tuser-1::strøm ✓ 中文",
    "n:5\tuser-3::",  # an empty value
]

EXPECTED = [  # (key, value, headers) of each input line
    (b"user-1", b"first value, with spaces", (("trace", b"abc"), ("dup", b"1"))),
    (b"user-2", None, (("dup", b"2"),)),
    (None, b"no key::but separators in the value", (("gone", None),)),
    (b"user-1", "strøm ✓ 中文".encode(), (("lang", b"da"),)),
    (b"user-3", b"", (("n", b"5"),)),
]


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Rec]:
    consumer = ck.consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        return sorted(ck.consume(consumer, count))
    finally:
        consumer.close()


def test_console_producer_then_console_consumer(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess
) -> None:
    topic = topic_name("console")
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    kafka_tools.run("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "3")

    produced = kafka_tools.run(
        "kafka-console-producer", *boot, "--topic", topic,
        "--property", "parse.key=true", "--property", "key.separator=::",
        "--property", "parse.headers=true", "--property", "null.marker=NULL",
        stdin="\n".join(PRODUCER_INPUT) + "\n",
    )  # fmt: skip
    assert produced.lines == []

    # Exactly these records are stored; records with the same key share a partition, in order.
    stored = read_all(shared_broker.bootstrap, topic, 3, len(EXPECTED))
    assert sorted(((r.key, r.value, r.headers) for r in stored), key=repr) == sorted(
        EXPECTED, key=repr
    )
    user1 = [r for r in stored if r.key == b"user-1"]
    assert [r.value for r in user1] == [EXPECTED[0][1], EXPECTED[3][1]]
    assert user1[0].partition == user1[1].partition
    assert user1[1].offset > user1[0].offset

    # --from-beginning --max-messages prints every record once, with the fields asked for.
    consumed = kafka_tools.run(
        "kafka-console-consumer", *boot, "--topic", topic, "--from-beginning",
        "--max-messages", str(len(EXPECTED)), "--timeout-ms", "20000",
        "--property", "print.key=true", "--property", "print.partition=true",
        "--property", "print.offset=true", "--property", "print.headers=true",
        "--property", "key.separator=|", "--property", "null.literal=<null>",
    )  # fmt: skip
    assert consumed.stderr.strip().endswith(f"Processed a total of {len(EXPECTED)} messages")

    def shown(value: bytes | None) -> str:
        return "<null>" if value is None else value.decode()

    expected_lines = [
        f"Partition:{r.partition}|Offset:{r.offset}|"
        + ",".join(f"{k}:{shown(v)}" for k, v in r.headers)
        + f"|{shown(r.key)}|{shown(r.value)}"
        for r in stored
    ]
    # partitions interleave in any order, but each partition's records come in offset order
    assert sorted(consumed.stdout.splitlines()) == sorted(expected_lines)
    for p in range(3):
        mine = [line for line in consumed.stdout.splitlines() if line.startswith(f"Partition:{p}|")]
        assert mine == [line for line in expected_lines if line.startswith(f"Partition:{p}|")]

    # --partition --offset reads from exactly there.
    last = user1[1]
    one = kafka_tools.run(
        "kafka-console-consumer", *boot, "--topic", topic, "--partition", str(last.partition),
        "--offset", str(last.offset), "--max-messages", "1", "--timeout-ms", "20000",
    )  # fmt: skip
    assert one.stdout.splitlines() == ["strøm ✓ 中文"]


def test_console_consumer_without_from_beginning_reads_only_new_records(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess
) -> None:
    topic, group = topic_name("console-new"), topic_name("console-group")
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    kafka_tools.run("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "2")
    kafka_tools.run("kafka-console-producer", *boot, "--topic", topic, stdin="old-1\nold-2\n")

    consumer = subprocess.Popen(
        kafka_tools.command(
            "kafka-console-consumer", *boot, "--topic", topic, "--group", group,
            "--max-messages", "2", "--timeout-ms", "60000",
        ),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        admin = ck.admin(shared_broker.bootstrap)

        def joined() -> bool:
            [future] = admin.describe_consumer_groups([group]).values()
            description = ck.result(future)
            assigned = sum(len(m.assignment.topic_partitions) for m in description.members)
            return bool(description.state == ConsumerGroupState.STABLE and assigned == 2)

        wait_until(joined, timeout=30, what="the console consumer's group to be stable")

        # Its position is the log end it found on joining (auto.offset.reset=latest); its
        # auto-commit shows that position before anything new is produced.
        reader = ck.consumer(shared_broker.bootstrap)
        ends = {p: ck.watermarks(reader, topic, p)[1] for p in range(2)}
        reader.close()
        assert sum(ends.values()) == 2

        def committed_at_end() -> bool:
            request = ConsumerGroupTopicPartitions(group)
            [future] = admin.list_consumer_group_offsets([request]).values()
            offsets = ck.result(future).topic_partitions
            return {tp.partition: tp.offset for tp in offsets} == ends

        wait_until(committed_at_end, timeout=30, what="the console consumer's committed offsets")
        kafka_tools.run("kafka-console-producer", *boot, "--topic", topic, stdin="new-1\nnew-2\n")
        stdout, stderr = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()
    assert consumer.returncode == 0, stderr
    assert sorted(stdout.splitlines()) == ["new-1", "new-2"]
    assert stderr.strip().endswith("Processed a total of 2 messages")
