"""kafka-leader-election.sh (ElectLeaders) and kafka-reassign-partitions.sh (--list, --execute,
--verify: AlterPartitionReassignments, ListPartitionReassignments) against a single node."""

from __future__ import annotations

import json
from pathlib import Path

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import topic_name
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.embedded import BrokerProcess


def test_leader_election(kafka_tools: KafkaTools, shared_broker: BrokerProcess) -> None:
    """A single node's partitions are led by their only (preferred) replica: nothing to elect."""
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    topic = topic_name("elect")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 2)
    for election in ("preferred", "unclean"):
        out = kafka_tools.run("kafka-leader-election", *boot, "--election-type", election,
                              "--topic", topic, "--partition", "0")  # fmt: skip
        assert out.lines == [f"Valid replica already elected for partitions {topic}-0"]
    # every partition: those needing no election are left out of the answer, so nothing prints
    out = kafka_tools.run("kafka-leader-election", *boot, "--election-type", "preferred",
                          "--all-topic-partitions")  # fmt: skip
    assert out.lines == []


def test_reassign_partitions(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    boot = ("--bootstrap-server", shared_broker.bootstrap)
    topic = topic_name("reassign")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 1)
    listed = kafka_tools.run("kafka-reassign-partitions", *boot, "--list")
    assert listed.lines == ["No partition reassignments found."]

    plan = tmp_path / "plan.json"
    partitions = [{"topic": topic, "partition": 0, "replicas": [1]}]
    plan.write_text(json.dumps({"version": 1, "partitions": partitions}))
    plan_args = ("--reassignment-json-file", str(plan))
    executed = kafka_tools.run("kafka-reassign-partitions", *boot, "--execute", *plan_args)
    assert executed.lines[0] == "Current partition replica assignment"
    current = json.loads(next(line for line in executed.lines if line.startswith("{")))
    assert current["partitions"] == [{**partitions[0], "log_dirs": ["any"]}]
    assert executed.lines[-1] == f"Successfully started partition reassignment for {topic}-0"

    verified = kafka_tools.run("kafka-reassign-partitions", *boot, "--verify", *plan_args)
    assert verified.lines[:2] == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
    ]
    assert "Clearing broker-level throttles on broker 1" in verified.lines
