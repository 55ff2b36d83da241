"""Request fault injection on a real `strom serve`: what each kind of rule answers, that it is
used up, and that nothing but the harness's environment turns it on (fail closed)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, Producer

from strom.broker.network.faults import ENV
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import BrokerProcess, child_environment
from strom.broker.testing.faults import FaultControlError
from strom.wire.errors import ErrorCode
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.join_group import JoinGroupRequest, JoinGroupResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records.builder import build_batch
from strom.wire.records.record import Record


async def _create(client: KafkaClient, topic: str, partitions: int) -> None:
    request = CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(topic, partitions, 1)], timeout_ms=10000
    )
    response = await client.request(request, 5, CreateTopicsResponse)
    assert response.topics[0].error_code == 0


def _produce(topic: str, partitions: list[int]) -> ProduceRequest:
    batch = bytes(build_batch([Record(None, b"x")]))
    return ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(topic, [ProduceRequest.PartitionProduceData(p, batch) for p in partitions])
    ])  # fmt: skip


def _errors(response: ProduceResponse) -> dict[int, int]:
    return {p.index: p.error_code for t in response.responses for p in t.partition_responses}


def test_produce_fails_only_the_named_partition_and_is_used_up(strom_broker: BrokerProcess) -> None:
    strom_broker.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic="t", partition=0)

    async def main() -> None:
        client = await KafkaClient.connect(strom_broker.bootstrap)
        await _create(client, "t", 2)
        first = await client.request(_produce("t", [0, 1]), 9, ProduceResponse)
        assert _errors(first) == {0: ErrorCode.NOT_LEADER_OR_FOLLOWER, 1: 0}
        second = await client.request(_produce("t", [0]), 9, ProduceResponse)
        assert _errors(second) == {0: ErrorCode.NOT_LEADER_OR_FOLLOWER}
        third = await client.request(_produce("t", [0]), 9, ProduceResponse)
        assert _errors(third) == {0: 0}
        assert (
            third.responses[0].partition_responses[0].base_offset == 0
        )  # nothing was appended before
        offsets = await client.request(ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic("t", [ListOffsetsRequest.ListOffsetsPartition(1, timestamp=-1)])
        ]), 5, ListOffsetsResponse)  # fmt: skip
        assert offsets.topics[0].partitions[0].offset == 1  # partition 1's append happened once
        await client.aclose()

    trio.run(main)
    assert strom_broker.faults is not None
    assert strom_broker.faults.rules() == []


def test_whole_request_errors_metadata_topics_and_delays(strom_broker: BrokerProcess) -> None:
    strom_broker.fail("JoinGroup", "COORDINATOR_NOT_AVAILABLE")
    strom_broker.fail("Metadata", "LEADER_NOT_AVAILABLE", topic="m")
    strom_broker.delay("ApiVersions", 300, count=1)

    async def main() -> None:
        began = time.monotonic()
        client = await KafkaClient.connect(strom_broker.bootstrap)
        from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

        await client.request(ApiVersionsRequest(), 3, ApiVersionsResponse)
        assert time.monotonic() - began >= 0.3
        join = JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                member_id="", protocol_type="consumer", protocols=[
                                    JoinGroupRequest.JoinGroupRequestProtocol("range", b"")])  # fmt: skip
        joined = await client.request(join, 5, JoinGroupResponse)
        assert joined.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        await _create(client, "m", 1)
        metadata = await client.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="m")]),
            12,
            MetadataResponse,
        )
        assert metadata.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
        assert metadata.brokers  # the brokers stay in the answer
        again = await client.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="m")]),
            12,
            MetadataResponse,
        )
        assert again.topics[0].error_code == 0
        await client.aclose()

    trio.run(main)


def test_a_producer_retries_through_injected_errors_without_duplicates(
    strom_broker: BrokerProcess,
) -> None:
    """The kind of test an application writes: its producer must retry retriable errors."""
    strom_broker.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=3, topic="payments")
    producer = Producer({"bootstrap.servers": strom_broker.bootstrap, "enable.idempotence": True})
    for i in range(5):
        producer.produce("payments", value=b"%d" % i)
    assert producer.flush(30) == 0
    del producer
    consumer = Consumer({"bootstrap.servers": strom_broker.bootstrap, "group.id": "audit",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["payments"])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert sorted(values) == [b"0", b"1", b"2", b"3", b"4"]


def test_bad_rules_are_refused(strom_broker: BrokerProcess) -> None:
    assert strom_broker.faults is not None
    with pytest.raises(FaultControlError, match="needs its topic"):
        strom_broker.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", partition=1)
    with pytest.raises(ValueError, match="unknown API"):
        strom_broker.fail("Produse", "NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(ValueError, match="unknown error"):
        strom_broker.fail("Produce", "NOT_A_LEADER")


def test_fault_injection_fails_closed(tmp_path: Path) -> None:
    """A socket that cannot be reached stops start-up; no config key exists to turn it on."""
    base = [sys.executable, "-m", "strom", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", f"log.dirs={tmp_path / 'data'}"]  # fmt: skip
    env = {**child_environment(), ENV: str(tmp_path / "nobody.sock")}
    done = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    assert ENV in done.stderr.strip().splitlines()[-1]
    as_config = subprocess.run(
        [*base, "--override", "strom.test.fault.injection=true"],
        capture_output=True, text=True, timeout=60, env={k: v for k, v in child_environment().items() if k != ENV},
    )  # fmt: skip
    assert as_config.returncode == 2
    assert "unknown config key" in as_config.stderr
    assert ENV not in os.environ
