"""Three `strom serve` processes form a cluster on the Raft quorum.

Static voters need every controller port before any node starts. Until the test harness can hand
a child an already bound socket, this test picks the ports by binding port 0 and closes those
sockets just before starting the children: a stopgap (another process could take a port in
between; the test then fails to start, it never talks to a stranger).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from strom.broker.testing.client import KafkaClient, describe_quorum
from strom.broker.testing.embedded import BrokerProcess, child_environment
from strom.wire.errors import ErrorCode
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

pytestmark = pytest.mark.trio
CLUSTER_ID = "cXVvcnVtLXByb2Nlc3Mtdg"
TIMEOUT_S = 60


def _reserve_ports(count: int) -> tuple[list[socket.socket], list[int]]:
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    return sockets, [s.getsockname()[1] for s in sockets]


async def _leader(controller: str) -> int:
    response = await describe_quorum(controller)
    [topic] = response.topics
    [partition] = topic.partitions
    return partition.leader_id


async def _metadata(bootstrap: str) -> MetadataResponse:
    client = await KafkaClient.connect(bootstrap)
    try:
        return await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
    finally:
        await client.aclose()


async def _create(bootstrap: str, name: str) -> None:
    """CreateTopics (3 partitions, 3 replicas) on `bootstrap`, which must succeed."""
    client = await KafkaClient.connect(bootstrap)
    try:
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=3, replication_factor=3
        )
        created = await client.request(CreateTopicsRequest(topics=[topic]), 7, CreateTopicsResponse)
    finally:
        await client.aclose()
    assert [t.error_code for t in created.topics] == [ErrorCode.NONE]


async def _init_producer_id(bootstrap: str) -> int:
    """An idempotent producer's InitProducerId on `bootstrap`, which must succeed."""
    client = await KafkaClient.connect(bootstrap)
    try:
        response = await client.request(
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000),
            4,
            InitProducerIdResponse,
        )
    finally:
        await client.aclose()
    assert response.error_code == ErrorCode.NONE
    return response.producer_id


def _format(*nodes: BrokerProcess) -> None:
    """`strom format --cluster-id CLUSTER_ID` with each node's configuration, as an operator
    formats every member of a multi-node quorum before its first start."""
    for node in nodes:
        args = [sys.executable, "-m", "strom", "format", "--cluster-id", CLUSTER_ID]
        for key, value in node.overrides.items():
            args += ["--override", f"{key}={value}"]
        done = subprocess.run(args, capture_output=True, text=True, env=child_environment())
        assert done.returncode == 0, done.stderr


async def _until(check: Callable[[], Awaitable[bool]], poll_s: float = 0.05) -> None:
    """Poll an async predicate (other processes' state has no event to wait on)."""
    with trio.fail_after(TIMEOUT_S):
        while not await check():  # noqa: ASYNC110 (another process: no event to wait on)
            await trio.sleep(poll_s)


async def test_three_serve_processes_form_a_cluster(tmp_path: Path) -> None:
    reserved, ports = _reserve_ports(3)
    voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(ports))
    nodes = [
        BrokerProcess(
            tmp_path / f"node{i + 1}",
            {
                "node.id": str(i + 1),
                "process.roles": "broker,controller",
                "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
                "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters,
                "cluster.id": CLUSTER_ID,
                "metadata.log.dir": str(tmp_path / f"node{i + 1}" / "meta"),
                "controller.quorum.election.timeout.ms": "300",
                "controller.quorum.fetch.timeout.ms": "600",
                "controller.quorum.election.backoff.max.ms": "300",
                "broker.heartbeat.interval.ms": "100",
                # the killed node's new incarnation registers once the old one's lease is out
                "broker.session.timeout.ms": "1500",
            },
        )
        for i, port in enumerate(ports)
    ]
    _format(*nodes)
    for sock in reserved:
        sock.close()
    try:
        bootstraps = [node.start(timeout=30) for node in nodes]

        async def all_registered() -> bool:
            for bootstrap in bootstraps:
                brokers = (await _metadata(bootstrap)).brokers
                if sorted(b.node_id for b in brokers) != [1, 2, 3]:
                    return False
            return True

        await _until(all_registered)
        leader = await _leader(f"127.0.0.1:{ports[0]}")
        assert leader in (1, 2, 3)

        # idempotent producers on every node: the brokers that are not the active controller
        # take their producer id blocks from it with AllocateProducerIds
        producer_ids = [await _init_producer_id(bootstrap) for bootstrap in bootstraps]
        assert len(set(producer_ids)) == 3

        # the brokers' own topic creations go to the active controller too: auto-creation by
        # Metadata on a node that is not the active controller
        follower = next(b for i, b in enumerate(bootstraps, 1) if i != leader)

        async def auto_created() -> bool:
            client = await KafkaClient.connect(follower)
            try:
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                    allow_auto_topic_creation=True,
                )
                response = await client.request(request, 12, MetadataResponse)
            finally:
                await client.aclose()
            return response.topics[0].error_code == ErrorCode.NONE

        await _until(auto_created)

        await _create(bootstraps[leader - 1], "across")

        async def everywhere() -> bool:
            for bootstrap in bootstraps:
                topics = (await _metadata(bootstrap)).topics
                if not any(t.name == "across" and len(t.partitions) == 3 for t in topics):
                    return False
            return True

        await _until(everywhere)

        # SIGKILL the active controller: another voter takes over, and the killed node, started
        # again on its directories, catches up
        nodes[leader - 1].kill()
        others = [i for i in (1, 2, 3) if i != leader]

        async def new_leader() -> bool:
            try:
                found = await _leader(f"127.0.0.1:{ports[others[0] - 1]}")
            except OSError:
                return False
            return found in others

        await _until(new_leader)
        second = await _leader(f"127.0.0.1:{ports[others[0] - 1]}")
        await _create(bootstraps[second - 1], "after-failover")
        bootstraps[leader - 1] = nodes[leader - 1].start(timeout=30)

        async def caught_up() -> bool:
            names = {t.name for t in (await _metadata(bootstraps[leader - 1])).topics}
            return {"across", "after-failover"} <= names

        await _until(caught_up)
        assert [node.stop(timeout=30) for node in nodes] == [0, 0, 0]
    finally:
        for node in nodes:
            if node.process is not None and node.process.poll() is None:
                node.stop(timeout=30)


async def test_a_controller_only_voter_and_a_broker_only_observer(tmp_path: Path) -> None:
    """Split roles: the broker registers with the controller over the controller listener and
    follows its log; CreateTopics on the broker is forwarded to the active controller, which
    creates the topic (asked again on its own listener: TOPIC_ALREADY_EXISTS); the broker
    then serves it."""
    reserved, [port] = _reserve_ports(1)
    common = {
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "cluster.id": CLUSTER_ID,
    }
    controller = BrokerProcess(
        tmp_path / "controller",
        {
            **common,
            "node.id": "1",
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "metadata.log.dir": str(tmp_path / "controller" / "meta"),
        },
    )
    broker = BrokerProcess(
        tmp_path / "broker",
        {
            **common,
            "node.id": "2",
            "process.roles": "broker",
            "metadata.log.dir": str(tmp_path / "broker" / "meta"),
            "broker.heartbeat.interval.ms": "100",
        },
    )
    _format(controller, broker)
    reserved[0].close()
    try:
        controller.start(timeout=30)
        bootstrap = broker.start(timeout=30)

        async def registered() -> bool:
            return [b.node_id for b in (await _metadata(bootstrap)).brokers] == [2]

        await _until(registered)
        topic = CreateTopicsRequest.CreatableTopic(
            name="split", num_partitions=2, replication_factor=1
        )
        for address, expected in (
            (bootstrap, ErrorCode.NONE),  # forwarded to the active controller
            (f"127.0.0.1:{port}", ErrorCode.TOPIC_ALREADY_EXISTS),
        ):
            client = await KafkaClient.connect(address)
            try:
                created = await client.request(
                    CreateTopicsRequest(topics=[topic]), 7, CreateTopicsResponse
                )
            finally:
                await client.aclose()
            assert [t.error_code for t in created.topics] == [expected]

        async def served() -> bool:
            topics = (await _metadata(bootstrap)).topics
            return any(
                t.name == "split" and [p.leader_id for p in t.partitions] == [2, 2] for t in topics
            )

        await _until(served)
        assert [broker.stop(timeout=30), controller.stop(timeout=30)] == [0, 0]
    finally:
        for node in (broker, controller):
            if node.process is not None and node.process.poll() is None:
                node.stop(timeout=30)
