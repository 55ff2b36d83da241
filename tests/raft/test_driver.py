"""Three Raft drivers in one trio run, talking Kafka's RPCs over real sockets.

Each node binds its CONTROLLER listener on port 0 first (so the static voters are known), then
serves it with the broker's own `Server` (the handler table routes Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum to the node's driver). A crash cancels
the node's tasks without a clean shutdown; a restart opens the same metadata directory and
rebinds the same port.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from strom.broker.drivers.raft import RaftDriver, raft_config
from strom.broker.network.server import Server
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient, describe_quorum
from strom.config import BrokerConfig
from strom.config.quorum import Address
from strom.coordinator.raft import wire
from strom.coordinator.raft.messages import FetchRequest, VoteRequest
from strom.storage.raft.raft_store import Entry, SnapshotId
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.describe_quorum import DescribeQuorumResponse
from strom.wire.messages.fetch import FetchResponse
from strom.wire.messages.vote import VoteResponse
from tests.raft.waiting import until as wait_until

CLUSTER_ID = "raft-driver-test-cluster"
TIMEOUT_S = 30

pytestmark = pytest.mark.trio


class Applied:
    """A state machine that records what the driver gives it: its image is the payloads."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.image: list[bytes] = []
        self.snapshots: list[SnapshotId] = []

    def apply(self, entries: list[Entry]) -> None:
        assert not self.entries or entries[0].offset == self.entries[-1].offset + 1
        self.entries.extend(entries)
        self.image.extend(e.data for e in entries if not e.control)

    async def load_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        self.snapshots.append(snapshot)
        self.entries = []
        self.image = data.split(b"\n") if data else []

    def snapshot_failed(self, snapshot: SnapshotId, error: OSError) -> None:
        raise AssertionError(f"snapshot {snapshot} failed: {error}")

    def payloads(self) -> list[bytes]:
        return self.image


class Node:
    def __init__(self, node_id: int, directory: Path, config: BrokerConfig) -> None:
        self.node_id = node_id
        self.directory = directory
        self.config = config
        self.driver: RaftDriver | None = None
        self.machine = Applied()
        self._scope: trio.CancelScope | None = None

    @property
    def running(self) -> RaftDriver:
        assert self.driver is not None
        return self.driver

    async def start(self, nursery: trio.Nursery, listener: trio.SocketListener) -> None:
        self.machine = Applied()
        self.driver = RaftDriver.from_config(self.config, CLUSTER_ID, self.machine)
        state = BrokerState(
            self.config, self.node_id, CLUSTER_ID, [], cast(Any, None), cast(Any, None),
            cast(Any, None),
        )  # fmt: skip
        state.raft = self.driver
        await nursery.start(self._serve, listener, state, self.driver)

    async def _serve(
        self,
        listener: trio.SocketListener,
        state: BrokerState,
        driver: RaftDriver,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                await nursery.start(driver.run)
                server = Server(state)
                nursery.start_soon(server.serve_listener, listener, "CONTROLLER", nursery)
                task_status.started()

    def crash(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
        self.driver = None


def _config(node_id: int, port: int, voters: dict[int, Address], directory: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "node.id": str(node_id),
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": ",".join(f"{i}@{a}" for i, a in voters.items()),
            "metadata.log.dir": str(directory),
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": "600",
            "controller.quorum.election.backoff.max.ms": "300",
            "controller.quorum.request.timeout.ms": "1000",
        }
    )


class Quorum:
    def __init__(self, nursery: trio.Nursery, nodes: dict[int, Node]) -> None:
        self.nursery = nursery
        self.nodes = nodes

    def running(self) -> list[RaftDriver]:
        return [n.driver for n in self.nodes.values() if n.driver is not None]

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait for `done()` to hold, re-checking at every change any driver reports."""
        await wait_until(done, lambda: [d.next_change() for d in self.running()], TIMEOUT_S)

    def agreed_leader(self) -> RaftDriver | None:
        """The leader every running node follows in one epoch, if there is one."""
        drivers = self.running()
        views = {(d.epoch, d.leader_id) for d in drivers}
        if len(views) != 1:
            return None
        [(_, leader_id)] = views
        leader = self.nodes[leader_id].driver if leader_id in self.nodes else None
        return leader

    async def leader(self) -> RaftDriver:
        await self.until(lambda: self.agreed_leader() is not None)
        leader = self.agreed_leader()
        assert leader is not None
        return leader

    async def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        port = node.config.controller_endpoints[0].port
        [listener] = await trio.open_tcp_listeners(port, host="127.0.0.1")
        await node.start(self.nursery, listener)

    async def propose_committed(self, payloads: list[bytes]) -> None:
        """Propose on the leader and wait until every running node has applied the entries."""
        leader = await self.leader()
        assert leader.propose(payloads) is not None
        await self.until(
            lambda: all(
                payloads[-1] in n.machine.payloads()
                for n in self.nodes.values()
                if n.driver is not None
            )
        )


@asynccontextmanager
async def quorum(tmp_path: Path, size: int = 3) -> AsyncIterator[Quorum]:
    listeners = [(await trio.open_tcp_listeners(0, host="127.0.0.1"))[0] for _ in range(size)]
    ports = [listener.socket.getsockname()[1] for listener in listeners]
    voters = {i + 1: Address("127.0.0.1", port) for i, port in enumerate(ports)}
    nodes = {
        node_id: Node(
            node_id,
            tmp_path / f"node{node_id}",
            _config(node_id, address.port, voters, tmp_path / f"node{node_id}"),
        )
        for node_id, address in voters.items()
    }
    async with trio.open_nursery() as nursery:
        for node, listener in zip(nodes.values(), listeners, strict=True):
            await node.start(nursery, listener)
        yield Quorum(nursery, nodes)
        nursery.cancel_scope.cancel()


async def _describe(
    address: Address,
) -> tuple[DescribeQuorumResponse.PartitionData, list[DescribeQuorumResponse.Node]]:
    response = await describe_quorum(str(address))
    [topic] = response.topics
    [partition] = topic.partitions
    return partition, response.nodes


def _address(quorum: Quorum, node_id: int) -> Address:
    endpoint = quorum.nodes[node_id].config.controller_endpoints[0]
    return Address(endpoint.host, endpoint.port)


async def test_three_voters_elect_replicate_commit_and_describe(tmp_path: Path) -> None:
    async with quorum(tmp_path) as q:
        leader = await q.leader()
        await q.propose_committed([b"one", b"two", b"three"])
        for node in q.nodes.values():
            assert node.machine.payloads() == [b"one", b"two", b"three"]

        info, nodes = await _describe(_address(q, leader.node_id))
        assert info.error_code == ErrorCode.NONE
        assert info.leader_id == leader.node_id
        assert info.leader_epoch == leader.epoch
        assert info.high_watermark == leader.high_watermark >= 4  # leader's control entry + 3
        assert sorted(v.replica_id for v in info.current_voters) == [1, 2, 3]
        leader_state = next(v for v in info.current_voters if v.replica_id == leader.node_id)
        assert leader_state.log_end_offset == info.high_watermark
        for voter in info.current_voters:
            lag = info.high_watermark - voter.log_end_offset
            assert 0 <= lag <= info.high_watermark
        assert info.observers == []
        wall_ms = time.time_ns() // 1_000_000
        for voter in info.current_voters:
            assert wall_ms - 60_000 < voter.last_fetch_timestamp <= wall_ms
        assert [(n.node_id, [(x.name, x.port) for x in n.listeners]) for n in nodes] == [
            (i, [("CONTROLLER", _address(q, i).port)]) for i in (1, 2, 3)
        ]

        follower = next(i for i in q.nodes if i != leader.node_id)
        refused, _ = await _describe(_address(q, follower))
        assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_an_idle_quorum_wakes_at_its_timers_only(tmp_path: Path) -> None:
    """The tick loop sleeps until the core's next deadline or an input (it once woke itself
    after every tick: a busy loop that starved the disk-write thread and stalled elections)."""
    async with quorum(tmp_path) as q:
        await q.propose_committed([b"settled"])
        before = {d.node_id: d.ticks for d in q.running()}
        await trio.sleep(1.0)  # the window observed, not a synchronisation
        woke = {d.node_id: d.ticks - before[d.node_id] for d in q.running()}
    # Followers fetch (long-polled up to fetch_max_wait), the leader checks its quorum: a few
    # dozen wake-ups a second at most; the busy loop made tens of thousands.
    assert all(count < 200 for count in woke.values()), woke


async def test_leader_crash_elects_a_new_leader_and_the_restarted_node_catches_up(
    tmp_path: Path,
) -> None:
    async with quorum(tmp_path) as q:
        first = await q.leader()
        await q.propose_committed([b"before"])
        old_epoch, old_id = first.epoch, first.node_id
        q.nodes[old_id].crash()

        second = await q.leader()
        assert second.node_id != old_id
        assert second.epoch > old_epoch
        await q.propose_committed([b"after-1", b"after-2"])

        await q.restart(old_id)
        await q.propose_committed([b"after-restart"])
        expected = [b"before", b"after-1", b"after-2", b"after-restart"]
        for node in q.nodes.values():
            assert node.machine.payloads() == expected
        committed = [(e.offset, e.epoch, e.data) for e in q.nodes[old_id].machine.entries]
        for node in q.nodes.values():
            assert [(e.offset, e.epoch, e.data) for e in node.machine.entries] == committed


async def test_a_voter_behind_the_leaders_snapshot_catches_up_with_fetch_snapshot(
    tmp_path: Path,
) -> None:
    async with quorum(tmp_path) as q:
        leader = await q.leader()
        behind = next(i for i in q.nodes if i != leader.node_id)
        await q.propose_committed([b"a"])
        q.nodes[behind].crash()
        await q.propose_committed([b"b", b"c"])
        machine = q.nodes[leader.node_id].machine
        snapshot = leader.snapshot(leader.applied, b"\n".join(machine.image))
        assert snapshot.end_offset == leader.applied
        await q.propose_committed([b"d"])

        await q.restart(behind)
        await q.propose_committed([b"e"])
        restarted = q.nodes[behind].machine
        assert restarted.snapshots == [snapshot]
        assert restarted.payloads() == [b"a", b"b", b"c", b"d", b"e"]


async def test_a_clean_shutdown_of_the_leader_hands_over_to_another_voter(tmp_path: Path) -> None:
    async with quorum(tmp_path) as q:
        first = await q.leader()
        old_epoch, old_id = first.epoch, first.node_id
        await first.shutdown()
        q.nodes[old_id].driver = None
        second = await q.leader()
        assert second.node_id != old_id
        assert second.epoch > old_epoch
        await q.propose_committed([b"x"])


async def test_a_peer_of_another_cluster_or_an_old_fetch_is_refused(tmp_path: Path) -> None:
    async with quorum(tmp_path) as q:
        await q.leader()
        client = await KafkaClient.connect(str(_address(q, 1)), "stranger")
        try:
            vote = wire.request_to_wire(VoteRequest(5, 1, 9, 0, 0, False), 1, "other-cluster", 2)
            refused = await client.request(vote, 2, VoteResponse)
            assert refused.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
            old = wire.request_to_wire(FetchRequest(6, 1, 9, 0, -1, 0), 1, CLUSTER_ID, 12)
            with pytest.raises(ProtocolError, match="closed"):
                await client.request(old, 12, FetchResponse)
        finally:
            await client.aclose()


async def test_a_request_before_the_driver_runs_closes_the_connection(tmp_path: Path) -> None:
    """A peer's Vote that reaches a node between its listener opening and its Raft log being
    loaded is not an error of the server (UNKNOWN_SERVER_ERROR, logged at ERROR): the
    connection closes and the peer retries, as after any connection failure."""
    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listener.socket.getsockname()[1]
    config = _config(1, port, {1: Address("127.0.0.1", port)}, tmp_path / "node1")
    state = BrokerState(
        config, 1, CLUSTER_ID, [], cast(Any, None), cast(Any, None), cast(Any, None)
    )
    state.raft = RaftDriver.from_config(config, CLUSTER_ID, Applied())  # never run
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Server(state).serve_listener, listener, "CONTROLLER", nursery)
        client = await KafkaClient.connect(f"127.0.0.1:{port}", "early-peer")
        try:
            vote = wire.request_to_wire(VoteRequest(5, 2, 1, 0, 0, False), 2, CLUSTER_ID, 2)
            with pytest.raises(ProtocolError, match="closed"):
                await client.request(vote, 2, VoteResponse)
        finally:
            await client.aclose()
        nursery.cancel_scope.cancel()


async def test_config_maps_to_the_core() -> None:
    config = _config(1, 9093, {1: Address("127.0.0.1", 9093)}, Path("/tmp/unused"))
    core = raft_config(config)
    assert (core.election_timeout_ms, core.fetch_timeout_ms, core.request_timeout_ms) == (
        300,
        600,
        1000,
    )
