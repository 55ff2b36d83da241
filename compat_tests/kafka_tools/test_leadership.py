"""kafka-leader-election.sh (ElectLeaders) and kafka-reassign-partitions.sh (--list, --execute,
--verify: AlterPartitionReassignments, ListPartitionReassignments) against a single node."""

from __future__ import annotations

import json
import re
import uuid
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


def _register_fake_broker(bootstrap: str, controller: str, broker_id: int) -> None:
    """Register broker `broker_id` with the node's controller listener and unfence it with one
    heartbeat (it never serves: reassignments only need it registered and active)."""
    import trio

    from strom.broker.testing.client import KafkaClient
    from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
    from strom.wire.messages.broker_registration import (
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
    )
    from strom.wire.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse

    async def register() -> None:
        admin = await KafkaClient.connect(bootstrap)
        try:
            cluster = await admin.request(DescribeClusterRequest(), 0, DescribeClusterResponse)
        finally:
            await admin.aclose()
        client = await KafkaClient.connect(controller, f"broker-{broker_id}")
        try:
            request = BrokerRegistrationRequest(
                broker_id=broker_id,
                cluster_id=cluster.cluster_id,
                incarnation_id=uuid.UUID(int=broker_id),
                listeners=[BrokerRegistrationRequest.Listener("PLAINTEXT", "127.0.0.1", 19092, 0)],
                features=[BrokerRegistrationRequest.Feature("metadata.version", 7, 25)],
            )
            registered = await client.request(request, 4, BrokerRegistrationResponse)
            assert registered.error_code == 0
            heartbeat = BrokerHeartbeatRequest(
                broker_id=broker_id,
                broker_epoch=registered.broker_epoch,
                current_metadata_offset=2**62,
            )
            beat = await client.request(heartbeat, 1, BrokerHeartbeatResponse)
            assert (beat.error_code, beat.is_fenced) == (0, False)
        finally:
            await client.aclose()

    trio.run(register)


def test_reassignment_in_progress_is_listed_verified_and_cancelled(
    kafka_tools: KafkaTools, tmp_path: Path
) -> None:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
        "broker.session.timeout.ms": "600000",  # broker 2 heartbeats once only
    }
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        started = next(line for line in broker.output if " started: " in line)
        controller = re.search(r"CONTROLLER://(\S+?)[, ]", started + " ")
        assert controller is not None, started
        _register_fake_broker(broker.bootstrap, controller.group(1), 2)
        boot = ("--bootstrap-server", broker.bootstrap)
        topic = topic_name("moving")
        ck.create_topic(ck.admin(broker.bootstrap), topic, 1)

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2]}]}
        ))  # fmt: skip
        plan_args = ("--reassignment-json-file", str(plan))
        executed = kafka_tools.run("kafka-reassign-partitions", *boot, "--execute", *plan_args)
        assert executed.lines[-1] == f"Successfully started partition reassignment for {topic}-0"

        listed = kafka_tools.run("kafka-reassign-partitions", *boot, "--list")
        assert listed.lines == [
            "Current partition reassignments:",
            f"{topic}-0: replicas: 1,2. adding: 2.",
        ]
        verified = kafka_tools.run("kafka-reassign-partitions", *boot, "--verify", *plan_args)
        assert verified.lines[:2] == [
            "Status of partition reassignment:",
            f"Reassignment of partition {topic}-0 is still in progress.",
        ]
        # broker 2 never serves: leave the throttles (clearing them talks to every broker)
        cancelled = kafka_tools.run("kafka-reassign-partitions", *boot, "--cancel", *plan_args,
                                    "--preserve-throttles")  # fmt: skip
        assert cancelled.lines[0] == f"Successfully cancelled partition reassignment for: {topic}-0"
        listed = kafka_tools.run("kafka-reassign-partitions", *boot, "--list")
        assert listed.lines == ["No partition reassignments found."]
