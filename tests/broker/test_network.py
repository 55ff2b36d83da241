"""The partition proxies of the cluster harness (`strom.broker.testing.network`) on plain
sockets: who is connecting (a node by its process's descriptors, or an outsider), a cut link
holding bytes one way while the other flows, a connection opened across a cut waiting for the
heal, a dead target refused, and nothing left open after close. This test process plays node 1.
And what the harness's partition calls cut, and how it configures nodes to go through fronts."""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.broker.testing.cluster import ClusterError, ClusterProcess
from strom.broker.testing.network import Network

QUIET = 0.3
"""How long a cut link must stay silent to count as holding (a bound on a negative check)."""


def silent(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], QUIET)
    return not readable


def read(sock: socket.socket, size: int) -> bytes:
    sock.settimeout(10)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def target() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    yield server
    server.close()


_OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def close_sockets() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def kept(sock: socket.socket) -> socket.socket:
    _OPEN.append(sock)
    return sock


def open_network(nodes: dict[int, int]) -> Network:
    return Network(lambda: dict(nodes))


def connect(network: Network, target: socket.socket) -> tuple[socket.socket, socket.socket]:
    """A connection from this process to node 2 (the target) through its front."""
    front = network.front(2, target.getsockname())
    client = kept(socket.create_connection(front, timeout=10))
    accepted, _ = target.accept()
    return client, kept(accepted)


def test_a_node_is_identified_by_its_process(target: socket.socket) -> None:
    network = open_network({1: os.getpid()})
    try:
        front = network.front(2, target.getsockname())
        client = kept(socket.create_connection(front))
        assert network.identify(client.getsockname(), front) == 1
        assert open_network({}).identify(("127.0.0.1", 1), front) is None
    finally:
        network.close()


def test_a_cut_holds_bytes_one_way_and_heal_delivers_them(target: socket.socket) -> None:
    network = open_network({1: os.getpid()})
    try:
        client, accepted = connect(network, target)
        client.sendall(b"before")
        assert read(accepted, 6) == b"before"
        network.cut([1], [2])
        assert network.cut_links == {(1, 2)}
        client.sendall(b"held")
        assert silent(accepted)
        accepted.sendall(b"back")  # 2 -> 1 is not cut
        assert read(client, 4) == b"back"
        network.heal()
        assert read(accepted, 4) == b"held"
    finally:
        network.close()


def test_a_cut_of_one_listener_leaves_the_others_flowing(target: socket.socket) -> None:
    """Replica fetches (the client listener) cut while controller traffic flows."""
    other = kept(socket.create_server(("127.0.0.1", 0)))
    network = open_network({1: os.getpid()})
    try:
        front = network.front(2, target.getsockname(), "PLAINTEXT")
        controller = network.front(2, other.getsockname(), "CONTROLLER")
        client = kept(socket.create_connection(front, timeout=10))
        accepted = kept(target.accept()[0])
        to_controller = kept(socket.create_connection(controller, timeout=10))
        at_controller = kept(other.accept()[0])
        network.cut([1], [2], "PLAINTEXT")
        client.sendall(b"held")
        to_controller.sendall(b"flows")
        assert read(at_controller, 5) == b"flows"
        assert silent(accepted)
        network.heal()
        assert read(accepted, 4) == b"held"
    finally:
        network.close()


def test_a_connection_across_a_cut_waits_for_the_heal(target: socket.socket) -> None:
    network = open_network({1: os.getpid()})
    try:
        network.cut([1], [2])
        front = network.front(2, target.getsockname())
        client = kept(socket.create_connection(front, timeout=10))  # accepted by the front...
        client.sendall(b"hello")
        assert silent(target)  # ...but not connected onward
        network.heal()
        accepted = kept(target.accept()[0])
        assert read(accepted, 5) == b"hello"
    finally:
        network.close()


def test_outsiders_are_never_cut(target: socket.socket) -> None:
    network = open_network({})  # this process is no node
    try:
        network.cut([1], [2])
        network.cut([2], [1])
        client, accepted = connect(network, target)
        client.sendall(b"client")
        assert read(accepted, 6) == b"client"
    finally:
        network.close()


def test_a_dead_target_is_refused_and_close_ends_everything(target: socket.socket) -> None:
    network = open_network({1: os.getpid()})
    address = target.getsockname()
    client, accepted = connect(network, target)
    target.close()
    dead = kept(socket.create_connection(network.front(2, address), timeout=10))
    assert read(dead, 1) == b""  # closed by the front: nothing listens behind it
    network.close()
    assert read(client, 1) == b""
    assert read(accepted, 1) == b""


def test_the_cluster_harness_partition_api(tmp_path: Path) -> None:
    """What `ClusterProcess.partition`, `partition_halves`, `cut` and `heal` cut (no node is
    started: the links are the harness's own state), and the configuration that routes every
    node's peers through the fronts."""
    cluster = ClusterProcess(tmp_path, combined=3, partitionable=True)
    try:
        network = cluster.network
        assert network is not None
        one, two, three = cluster.nodes
        config = one.overrides
        assert config["advertised.listeners"] == (
            f"PLAINTEXT://127.0.0.1:{one.fronts['PLAINTEXT']},"
            f"CONTROLLER://127.0.0.1:{one.fronts['CONTROLLER']}"
        )
        assert config["listeners"] == (
            f"PLAINTEXT://127.0.0.1:{one.port('PLAINTEXT')},"
            f"CONTROLLER://127.0.0.1:{one.port('CONTROLLER')}"
        )
        assert config["controller.quorum.voters"] == (  # itself direct, the others via fronts
            f"1@127.0.0.1:{one.port('CONTROLLER')},2@{two.controller_address},"
            f"3@{three.controller_address}"
        )
        assert two.controller_address == f"127.0.0.1:{two.fronts['CONTROLLER']}"
        cluster.partition(two)
        assert network.cut_links == {(2, 1), (2, 3), (1, 2), (3, 2)}
        cluster.heal()
        assert network.cut_links == frozenset()
        cluster.partition_halves([one], [three])  # node 2 bridges
        assert network.cut_links == {(1, 3), (3, 1)}
        cluster.heal()
        cluster.cut([1, 2], [3])
        assert network.cut_links == {(1, 3), (2, 3)}
    finally:
        cluster.close()
    plain = ClusterProcess(tmp_path / "plain", combined=1)
    try:
        assert "advertised.listeners" not in plain.nodes[0].overrides
        with pytest.raises(ClusterError, match="partitionable=True"):
            plain.partition(1)
    finally:
        plain.close()
