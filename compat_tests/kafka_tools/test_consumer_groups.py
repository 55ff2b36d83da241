"""kafka-consumer-groups.sh (ConsumerGroupCommand): list, describe, reset offsets, delete."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import now_ms, sample_records, topic_name, wait_until
from compat_tests.kafka_tools.tools import KafkaTools, ToolResult
from strom.broker.testing.embedded import BrokerProcess

PER_PARTITION = 5


def table(result: ToolResult) -> list[dict[str, str]]:
    """A column-aligned table the tool printed, one dict per row keyed by the header."""
    header, *rows = result.lines
    names = header.split()
    parsed = [dict(zip(names, row.split(), strict=True)) for row in rows]
    return sorted(parsed, key=lambda r: (r.get("TOPIC", ""), int(r.get("PARTITION", "0"))))


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {tp.partition: tp.offset for tp in ck.result(future).topic_partitions}


def group_state(admin: AdminClient, group: str) -> tuple[ConsumerGroupState, int]:
    [future] = admin.describe_consumer_groups([group]).values()
    description = ck.result(future)
    return description.state, len(description.members)


@pytest.fixture
def topic(shared_broker: BrokerProcess) -> str:
    """A two-partition topic with PER_PARTITION records in each."""
    name = topic_name("cg")
    ck.create_topic(ck.admin(shared_broker.bootstrap), name, 2)
    records = sample_records(2, PER_PARTITION, base_ts=now_ms())
    ck.produce_all(ck.producer(shared_broker.bootstrap), name, records)
    return name


def consume_all_with_group(
    tools: KafkaTools, broker: BrokerProcess, topic: str, group: str
) -> None:
    """The console consumer reads everything in `group` and commits on its way out."""
    tools.run(
        "kafka-console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--group", group, "--from-beginning", "--max-messages", str(2 * PER_PARTITION),
        "--timeout-ms", "20000",
    )  # fmt: skip


def test_list_describe_reset_delete(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess, topic: str
) -> None:
    group = topic_name("cg-group")
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    admin = ck.admin(shared_broker.bootstrap)
    consume_all_with_group(kafka_tools, shared_broker, topic, group)
    assert committed(admin, group) == {0: PER_PARTITION, 1: PER_PARTITION}

    assert group in kafka_tools.run("kafka-consumer-groups", *boot, "--list").lines

    described = kafka_tools.run("kafka-consumer-groups", *boot, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in described.stderr
    assert table(described) == [
        {
            "GROUP": group, "TOPIC": topic, "PARTITION": str(p),
            "CURRENT-OFFSET": str(PER_PARTITION), "LOG-END-OFFSET": str(PER_PARTITION),
            "LAG": "0", "CONSUMER-ID": "-", "HOST": "-", "CLIENT-ID": "-",
        }
        for p in range(2)
    ]
    state = kafka_tools.run("kafka-consumer-groups", *boot, "--describe", "--group", group,
                            "--state")  # fmt: skip
    assert state.lines[1].split() == [
        group, f"{shared_broker.bootstrap}", "(1)", "-", "Empty", "0"
    ], state.describe()

    def reset(*how: str) -> dict[int, int]:
        out = kafka_tools.run("kafka-consumer-groups", *boot, "--group", group,
                              "--reset-offsets", *how)  # fmt: skip
        return {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(out)}

    everything = ("--topic", topic)
    # Without --execute (and with --dry-run) the tool only shows the plan.
    assert reset(*everything, "--to-earliest") == {0: 0, 1: 0}
    assert reset(*everything, "--to-earliest", "--dry-run") == {0: 0, 1: 0}
    assert committed(admin, group) == {0: PER_PARTITION, 1: PER_PARTITION}

    assert reset(*everything, "--to-earliest", "--execute") == {0: 0, 1: 0}
    assert committed(admin, group) == {0: 0, 1: 0}

    assert reset("--topic", f"{topic}:1", "--to-offset", "3", "--execute") == {1: 3}
    assert committed(admin, group) == {0: 0, 1: 3}

    assert reset(*everything, "--shift-by", "2", "--execute") == {0: 2, 1: 5}
    assert committed(admin, group) == {0: 2, 1: 5}

    # Shifting past either end is clamped to the log's earliest/latest offsets.
    assert reset(*everything, "--shift-by", "-3", "--execute") == {0: 0, 1: 2}
    assert reset(*everything, "--shift-by", "100", "--execute") == {0: 5, 1: 5}
    assert reset(*everything, "--to-offset", "1", "--execute") == {0: 1, 1: 1}

    lagging = kafka_tools.run("kafka-consumer-groups", *boot, "--describe", "--group", group,
                              "--offsets")  # fmt: skip
    assert [(r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in table(lagging)] == [
        ("1", "5", "4"), ("1", "5", "4")
    ]

    deleted = kafka_tools.run("kafka-consumer-groups", *boot, "--delete", "--group", group)
    assert deleted.lines == [f"Deletion of requested consumer groups ('{group}') was successful."]
    assert group not in kafka_tools.run("kafka-consumer-groups", *boot, "--list").lines
    assert committed(admin, group) == {}


def test_an_active_group_is_described_and_protected(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess, topic: str
) -> None:
    group = topic_name("cg-active")
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    admin = ck.admin(shared_broker.bootstrap)
    member = subprocess.Popen(
        kafka_tools.command(
            "kafka-console-consumer", *boot, "--topic", topic, "--group", group,
            "--from-beginning", "--consumer-property", "client.id=cli-member",
        ),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(
            lambda: group_state(admin, group) == (ConsumerGroupState.STABLE, 1),
            timeout=30, what="the console consumer to join",
        )  # fmt: skip
        members = kafka_tools.run("kafka-consumer-groups", *boot, "--describe", "--group", group,
                                  "--members")  # fmt: skip
        [row] = table(members)
        assert row["GROUP"] == group
        assert row["CLIENT-ID"] == "cli-member"
        assert row["CONSUMER-ID"].startswith("cli-member-")
        assert row["HOST"] == "/127.0.0.1"
        assert row["#PARTITIONS"] == "2"

        state = kafka_tools.run("kafka-consumer-groups", *boot, "--describe", "--group", group,
                                "--state")  # fmt: skip
        assert state.lines[1].split()[3:] == ["range", "Stable", "1"], state.describe()

        refused = kafka_tools.run(
            "kafka-consumer-groups", *boot, "--group", group, "--reset-offsets", "--topic",
            topic, "--to-earliest", "--execute", check=False,
        )  # fmt: skip
        assert refused.lines[0] == (  # the tool reports this on stdout and exits 0
            f"Error: Assignments can only be reset if the group '{group}' is inactive, "
            "but the current state is Stable."
        ), refused.describe()
        assert len(refused.lines) == 2  # the table header, and no rows

        not_empty = kafka_tools.run("kafka-consumer-groups", *boot, "--delete", "--group", group,
                                    check=False)  # fmt: skip
        assert not_empty.lines == [
            "Error: Deletion of some consumer groups failed:",
            f"* Group '{group}' could not be deleted due to: "
            "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.",
        ], not_empty.describe()
        assert group in kafka_tools.run("kafka-consumer-groups", *boot, "--list").lines
    finally:
        member.terminate()  # SIGTERM: the console consumer's shutdown hook leaves the group
        try:
            member.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            member.kill()
            member.communicate()
    wait_until(
        lambda: group_state(admin, group)[0] == ConsumerGroupState.EMPTY,
        timeout=30, what="the group to be empty",
    )  # fmt: skip
    deleted = kafka_tools.run("kafka-consumer-groups", *boot, "--delete", "--group", group)
    assert deleted.lines == [f"Deletion of requested consumer groups ('{group}') was successful."]


def test_reset_by_time_export_import_and_delete_offsets(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """--to-datetime and --by-duration go through ListOffsets by timestamp; --export writes the
    plan as CSV that --from-file executes; --delete-offsets removes the committed offsets."""
    topic, group = topic_name("cg-time"), topic_name("cg-time-group")
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    admin = ck.admin(shared_broker.bootstrap)
    ck.create_topic(admin, topic, 2)
    base = now_ms() - 3_600_000  # an hour ago, one record a second
    records = sample_records(2, PER_PARTITION, base_ts=base, ts_step=1000)
    ck.produce_all(ck.producer(shared_broker.bootstrap), topic, records)
    consume_all_with_group(kafka_tools, shared_broker, topic, group)
    assert committed(admin, group) == {0: PER_PARTITION, 1: PER_PARTITION}

    def reset(*how: str) -> ToolResult:
        return kafka_tools.run("kafka-consumer-groups", *boot, "--group", group,
                               "--reset-offsets", "--topic", topic, *how)  # fmt: skip

    # the first record at or after base + 2.5 s is offset 3 in each partition
    moment = datetime.fromtimestamp((base + 2500) / 1000, tz=UTC)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    reset("--to-datetime", stamp, "--execute")
    assert committed(admin, group) == {0: 3, 1: 3}
    # records from the last two hours: all of them
    reset("--by-duration", "PT2H", "--execute")
    assert committed(admin, group) == {0: 0, 1: 0}

    exported = reset("--to-latest", "--export", "--dry-run")
    # CSV: topic,partition,offset per line (the writer quotes a topic name with hyphens)
    assert sorted(exported.lines) == [
        f'"{topic}",0,{PER_PARTITION}', f'"{topic}",1,{PER_PARTITION}'
    ]
    assert committed(admin, group) == {0: 0, 1: 0}
    plan = tmp_path / "plan.csv"
    plan.write_text(exported.stdout)
    kafka_tools.run("kafka-consumer-groups", *boot, "--group", group, "--reset-offsets",
                    "--from-file", str(plan), "--execute")  # fmt: skip
    assert committed(admin, group) == {0: PER_PARTITION, 1: PER_PARTITION}

    deleted = kafka_tools.run("kafka-consumer-groups", *boot, "--group", group,
                              "--delete-offsets", "--topic", f"{topic}:1")  # fmt: skip
    assert deleted.lines[0] == f"Request succeeded for deleting offsets from group {group}."
    assert deleted.lines[2].split() == [topic, "1", "Successful"]
    assert committed(admin, group) == {0: PER_PARTITION}
