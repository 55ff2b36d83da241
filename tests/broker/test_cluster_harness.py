"""The cluster harness (`strom.broker.testing.cluster`) on a one-node cluster with a controller
listener: start-up through socket activation, kill -9, restart on the same ports, pause, resume,
stop, and nothing left open afterwards. Multi-node clusters are tested in compat_tests/cluster.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.cluster import ClusterError, ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.errors import ErrorCode
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse


async def create_topic(address: str, name: str) -> None:
    client = await KafkaClient.connect(address)
    try:
        request = CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=2, replication_factor=1)],
            timeout_ms=30_000,
        )
        [result] = (await client.request(request, 7, CreateTopicsResponse)).topics
        assert result.error_code == ErrorCode.NONE, result.error_message
    finally:
        await client.aclose()


async def topics_of(address: str) -> set[str]:
    client = await KafkaClient.connect(address)
    try:
        response = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
        return {t.name for t in response.topics if t.name is not None}
    finally:
        await client.aclose()


async def answered_within(address: str, seconds: float) -> bool:
    """Whether ApiVersions is answered within `seconds` (a paused node's connection is
    accepted by the kernel but nothing answers)."""
    client = await KafkaClient.connect(address)
    try:
        with trio.move_on_after(seconds):
            await client.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
            return True
        return False
    finally:
        await client.aclose()


def refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_one_combined_node_with_a_controller_listener(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=1)
    [node] = cluster.nodes
    assert cluster.voters == f"1@{node.controller_address}"
    assert cluster.bootstrap == node.bootstrap
    assert cluster.bootstrap_controllers == node.controller_address
    started = [line for line in node.output if " started: " in line]
    assert f"PLAINTEXT://{node.bootstrap},CONTROLLER://{node.controller_address}" in started[0]
    meta = (node.data_dir / "metadata" / "meta.properties").read_text()
    assert f"cluster.id={cluster.cluster_id}" in meta  # formatted by `strom format`
    name = f"harness-{uuid.uuid4().hex[:8]}"
    trio.run(create_topic, cluster.bootstrap, name)
    assert name in trio.run(topics_of, cluster.bootstrap)


def _serving_soon(node: ClusterNode, timeout: float = 10.0) -> bool:
    """`node.serving` within `timeout` (its log line is read by another thread)."""
    deadline = time.monotonic() + timeout
    while not node.serving and time.monotonic() < deadline:
        time.sleep(0.02)  # polling the reader thread's state against the deadline
    return node.serving


def test_kill9_restart_pause_resume_stop(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=1)
    node = cluster.node(1)
    name = f"harness-{uuid.uuid4().hex[:8]}"
    trio.run(create_topic, node.bootstrap, name)
    first_pid = node.pid
    assert _serving_soon(node)  # it answered: its "unfenced and serving" line came before

    node.kill9()
    assert not node.alive
    assert not node.serving
    assert refused(node.bootstrap)  # a dead node refuses connections, on both listeners
    assert refused(node.controller_address)
    node.restart()
    assert node.pid != first_pid
    assert name in trio.run(topics_of, node.bootstrap)  # same ports, same data
    assert _serving_soon(node)  # the new process's own line, not the first one's

    node.pause()
    assert not trio.run(answered_within, node.bootstrap, 0.5)
    node.resume()
    assert trio.run(answered_within, node.bootstrap, 30.0)

    assert node.stop() == 0
    assert "Strom stopped; logs closed cleanly" in node.tail()
    assert refused(node.bootstrap)
    node.restart(clean=False)  # restart also starts a stopped node
    assert name in trio.run(topics_of, node.bootstrap)
    assert node.starts == 3
    assert "--- node 1: start 3 ---" in node.output


def test_nothing_is_left_open(tmp_path: Path) -> None:
    before = sorted(os.listdir("/proc/self/fd"))
    with ClusterProcess(tmp_path, combined=1) as cluster:
        node = cluster.node(1)
        node.kill9()
        node.restart()
        pid, address = node.pid, node.bootstrap
    assert not node.alive
    assert not os.path.exists(f"/proc/{pid}")  # reaped
    assert refused(address)
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_a_format_failure_is_reported(tmp_path: Path) -> None:
    cluster = ClusterProcess(tmp_path, combined=1, overrides={"num.partitions": "-5"})
    with pytest.raises(ClusterError, match=r"strom format failed: node 1: .*num\.partitions"), cluster:
        pass
    assert all(not n.alive for n in cluster.nodes)


def test_a_node_that_cannot_start_fails_with_its_log(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=1)
    node = cluster.node(1)
    node.kill9()
    meta = node.data_dir / "data" / "meta.properties"
    other = "AAAAAAAAAAAAAAAAAAAAAA"
    meta.write_text(meta.read_text().replace(cluster.cluster_id, other))
    with pytest.raises(ClusterError, match=f"(?s)node 1 exited with code 1 before starting.*{other}"):
        node.restart()
    assert f"===== node 1 (broker,controller) pid {node.pid} =====" in cluster.report()


def test_roles_are_combined_or_split(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either"):
        ClusterProcess(tmp_path, combined=3, brokers=1)
    with pytest.raises(ValueError, match="needs"):
        ClusterProcess(tmp_path, brokers=3)
    quorum_only = ClusterProcess(tmp_path / "quorum", controllers=3)  # brokers brought by a bench
    try:
        assert [n.roles for n in quorum_only.nodes] == [("controller",)] * 3
        assert quorum_only.brokers == []
    finally:
        quorum_only.close()
    split = ClusterProcess(
        tmp_path, controllers=3, brokers=2, overrides={"num.partitions": "3"},
        node_overrides={4: {"broker.rack": "a"}, 5: {"broker.rack": "b", "num.partitions": "5"}},
    )  # fmt: skip
    try:
        assert [n.roles for n in split.nodes] == [("controller",)] * 3 + [("broker",)] * 2
        assert split.voters.count("@") == 3
        assert len(split.bootstrap.split(",")) == 2
        assert "PLAINTEXT" not in split.node(1).overrides["listeners"]
        assert "CONTROLLER" not in split.node(4).overrides["listeners"]
        assert split.node(4).overrides["broker.rack"] == "a"
        assert split.node(4).overrides["num.partitions"] == "3"
        assert split.node(5).overrides["num.partitions"] == "5"
        assert "broker.rack" not in split.node(1).overrides
    finally:
        split.close()
