"""Three combined nodes' `QuorumController`s in one trio run, over real sockets.

As in test_driver: each node binds its CONTROLLER listener on port 0 first (the static voters
must be known up front) and serves it with the broker's `Server`, whose handler table routes the
Raft RPCs to `state.raft` and BrokerRegistration/BrokerHeartbeat to `state.controller`. Brokers
of nodes that are not the active controller register through `RemoteControllerChannel`. A crash
cancels a node's tasks; a restart opens the same directories and rebinds the same port.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from random import Random
from typing import Any, cast

import pytest
import trio
import trio.testing

from strom.broker.drivers.controller_channel import RemoteControllerChannel
from strom.broker.drivers.lifecycle import BrokerLifecycle
from strom.broker.drivers.quorum_controller import NotActiveController, QuorumController
from strom.broker.drivers.raft import RaftDriver
from strom.broker.network.server import Server
from strom.broker.state import BrokerState
from strom.config import BrokerConfig, Listener
from strom.config.quorum import Address
from strom.coordinator.controller.result import ControllerResult
from strom.coordinator.metadata.kraft_checkpoint import encode_bootstrap
from strom.coordinator.metadata.metadata_records import MetadataError, encode_batch
from strom.coordinator.metadata.raft_entries import (
    SnapshotLoader,
    decode_entry,
    decode_snapshot,
    encode_entries,
    encode_snapshot,
)
from strom.coordinator.raft.core import RaftCore
from strom.coordinator.raft.messages import Request
from strom.storage.meta_properties import format_directories
from strom.storage.raft.raft_store import Entry, QuorumState, RecoveredState, SnapshotId
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
from strom.wire.messages.alter_partition import AlterPartitionRequest
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.broker_registration import BrokerRegistrationRequest
from strom.wire.messages.create_topics import CreateTopicsRequest
from tests.raft.waiting import until as wait_until

CLUSTER_ID = "cXVvcnVtLWNvbnRyb2xsZQ"
TIMEOUT_S = 30

pytestmark = pytest.mark.trio


def _config(
    node_id: int, voters: dict[int, Address], directory: Path, **extra: str
) -> BrokerConfig:
    controller = voters.get(node_id)
    return BrokerConfig.from_properties(
        {
            "node.id": str(node_id),
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{getattr(controller, 'port', 0)}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": ",".join(f"{i}@{a}" for i, a in voters.items()),
            "cluster.id": CLUSTER_ID,
            "log.dirs": str(directory / "data"),
            "metadata.log.dir": str(directory / "meta"),
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": "600",
            "controller.quorum.election.backoff.max.ms": "300",
            "controller.quorum.request.timeout.ms": "1000",
            "controller.quorum.retry.backoff.ms": "20",
            "broker.heartbeat.interval.ms": "50",
            **{key.replace("_", "."): value for key, value in extra.items()},
        }
    )


def _observer_config(node_id: int, voters: dict[int, Address], directory: Path) -> BrokerConfig:
    """A broker-only node: an observer of the quorum (no controller listener of its own)."""
    return _config(
        node_id, voters, directory, process_roles="broker", listeners="PLAINTEXT://127.0.0.1:0"
    )


class Node:
    def __init__(self, node_id: int, config: BrokerConfig, snapshot_interval: int) -> None:
        self.node_id = node_id
        self.config = config
        self.snapshot_interval = snapshot_interval
        self.controller: QuorumController | None = None
        self._scope: trio.CancelScope | None = None

    @property
    def running(self) -> QuorumController:
        assert self.controller is not None
        return self.controller

    async def start(self, nursery: trio.Nursery, listener: trio.SocketListener | None) -> None:
        remote = partial(RemoteControllerChannel, client_id=f"broker-{self.node_id}", timeout_s=1.0)
        self.controller = await QuorumController.open(
            self.config, remote=remote, snapshot_interval_bytes=self.snapshot_interval
        )
        state = BrokerState(
            self.config, self.node_id, CLUSTER_ID, [], self.controller, cast(Any, None),
            cast(Any, None),
        )  # fmt: skip
        state.raft = self.controller.raft
        await nursery.start(self._serve, listener, state, self.controller)

    async def _serve(
        self,
        listener: trio.SocketListener | None,
        state: BrokerState,
        controller: QuorumController,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                await nursery.start(controller.run)
                nursery.start_soon(controller.watch_leases)
                if listener is not None:
                    server = Server(state)
                    nursery.start_soon(server.serve_listener, listener, "CONTROLLER", nursery)
                task_status.started()

    def crash(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
        self.controller = None

    async def register(self) -> int:
        """Register this node's broker (a made-up client endpoint) and wait until unfenced."""
        endpoint = Listener("PLAINTEXT", "127.0.0.1", 19000 + self.node_id)
        await self.running.start([endpoint])
        return self.running.broker_epoch


class Cluster:
    def __init__(self, nursery: trio.Nursery, nodes: dict[int, Node]) -> None:
        self.nursery = nursery
        self.nodes = nodes

    def running(self) -> list[QuorumController]:
        return [n.controller for n in self.nodes.values() if n.controller is not None]

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait for `done()`, re-checking at every publish or Raft change of any node."""
        await wait_until(done, lambda: [c.next_change() for c in self.running()], TIMEOUT_S)

    def agreed_active(self) -> QuorumController | None:
        """The one active controller, once every running node (observers too) knows it."""
        running = self.running()
        active = [c for c in running if c.is_active]
        if len(active) != 1 or {c.active_controller_id for c in running} != {active[0].node_id}:
            return None
        return active[0]

    async def active(self) -> QuorumController:
        await self.until(lambda: self.agreed_active() is not None)
        active = self.agreed_active()
        assert active is not None
        return active

    async def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        port = node.config.controller_endpoints[0].port
        [listener] = await trio.open_tcp_listeners(port, host="127.0.0.1")
        await node.start(self.nursery, listener)

    async def register_all(self) -> None:
        async with trio.open_nursery() as nursery:
            for node in self.nodes.values():
                if node.controller is not None:
                    nursery.start_soon(node.register)


def _format(config: BrokerConfig, features: dict[str, int]) -> None:
    """What `strom format --cluster-id CLUSTER_ID` writes for the node."""
    format_directories(
        config.data_dirs,
        config.metadata_dir,
        cluster_id=CLUSTER_ID,
        node_id=config.node_id,
        new_uuid=uuid.uuid4,
        ignore_formatted=False,
        bootstrap=encode_bootstrap(features, 0),
        voters=frozenset(config.quorum_voters) if "controller" in config.roles else None,
    )


@asynccontextmanager
async def cluster(
    tmp_path: Path,
    size: int = 3,
    *,
    observers: int = 0,
    snapshot_interval: int = 1 << 30,
    bootstrap: dict[str, int] | None = None,
    **extra: str,
) -> AsyncIterator[Cluster]:
    listeners = [(await trio.open_tcp_listeners(0, host="127.0.0.1"))[0] for _ in range(size)]
    ports = [listener.socket.getsockname()[1] for listener in listeners]
    voters = {i + 1: Address("127.0.0.1", port) for i, port in enumerate(ports)}
    nodes = {
        i: Node(i, _config(i, voters, tmp_path / f"node{i}", **extra), snapshot_interval)
        for i in voters
    }
    for i in range(size + 1, size + 1 + observers):
        nodes[i] = Node(i, _observer_config(i, voters, tmp_path / f"node{i}"), snapshot_interval)
    for node in nodes.values():  # as `strom format` leaves it on every node
        features = bootstrap or {"metadata.version": 25}
        await trio.to_thread.run_sync(_format, node.config, features)
    async with trio.open_nursery() as nursery:
        for node, listener in zip(nodes.values(), [*listeners, *[None] * observers], strict=True):
            await node.start(nursery, listener)
        yield Cluster(nursery, nodes)
        nursery.cancel_scope.cancel()


def _create(name: str, partitions: int = 3) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=3
            )
        ]
    )


async def test_three_voters_elect_register_and_replicate_a_topic(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        active = await c.active()
        await c.until(lambda: all(n.image.metadata_version > 0 for n in c.running()))
        await c.register_all()
        epochs = {n.node_id: n.broker_epoch for n in c.running()}
        await c.until(lambda: all(len(n.image.brokers()) == 3 for n in c.running()))
        for node in c.running():
            for broker_id, epoch in epochs.items():
                registration = node.image.broker(broker_id)
                assert registration is not None
                assert registration.epoch == epoch  # the offset of its RegisterBrokerRecord

        response = await active.create_topics(_create("replicated"), 7)
        assert [t.error_code for t in response.topics] == [ErrorCode.NONE]
        # answered once applied and published on the active controller; the others follow
        assert active.image.topic("replicated") is not None
        await c.until(lambda: all(n.image.topic("replicated") is not None for n in c.running()))
        topic_ids = {n.image.topics_by_name["replicated"].topic_id for n in c.running()}
        assert len(topic_ids) == 1
        for node in c.running():
            partitions = node.image.topics_by_name["replicated"].partitions
            assert sorted(partitions) == [0, 1, 2]
            assert all(sorted(p.replicas) == [1, 2, 3] for p in partitions.values())


async def test_a_node_that_is_not_the_active_controller_answers_not_controller(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path) as c:
        active = await c.active()
        follower = next(n for n in c.running() if n is not active)
        assert not follower.is_active
        assert follower.active_controller_id == active.node_id
        assert follower.controller_address(active.node_id) == Address(
            "127.0.0.1", c.nodes[active.node_id].config.controller_endpoints[0].port
        )

        response = await follower.create_topics(_create("refused"), 7)
        assert [(t.error_code, t.error_message) for t in response.topics] == [
            (ErrorCode.NOT_CONTROLLER, "this node is not the active controller")
        ]
        registration = await follower.broker_registration(
            BrokerRegistrationRequest(broker_id=9, cluster_id=CLUSTER_ID)
        )
        assert registration.error_code == ErrorCode.NOT_CONTROLLER
        assert await follower.fence_stale_brokers() == []
        altered = await follower.alter_partition(AlterPartitionRequest(broker_id=1), 3)
        assert altered.error_code == ErrorCode.NOT_CONTROLLER
        assert all(n.image.topic("refused") is None for n in c.running())


async def test_leader_crash_moves_the_active_controller_and_the_restarted_node_catches_up(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path) as c:
        first = await c.active()
        await c.register_all()
        created = await first.create_topics(_create("before"), 7)
        assert created.topics[0].error_code == ErrorCode.NONE
        old_id, old_epoch = first.node_id, first.epoch
        c.nodes[old_id].crash()

        second = await c.active()
        assert second.node_id != old_id
        assert second.epoch > old_epoch
        created = await second.create_topics(_create("after"), 7)
        assert created.topics[0].error_code == ErrorCode.NONE

        await c.restart(old_id)
        await c.until(
            lambda: all(
                n.image.topic("before") is not None and n.image.topic("after") is not None
                for n in c.running()
            )
        )
        restarted = c.nodes[old_id].running
        assert not restarted.is_active
        assert len(restarted.image.brokers()) == 3
        # the bootstrap records were written once, by the first leader
        assert restarted.image.metadata_version == first.image.metadata_version


async def test_a_snapshot_round_trips_the_image(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        active = await c.active()
        await c.register_all()
        await active.create_topics(_create("snap"), 7)
        image = active.image
        loaded, delta = decode_snapshot(encode_snapshot(image))
        assert loaded.provenance == image.provenance
        assert loaded.topics_by_name["snap"] == image.topics_by_name["snap"]
        assert [b.broker_id for b in loaded.brokers()] == [1, 2, 3]
        assert loaded.metadata_version == image.metadata_version
        assert delta is not None


async def test_a_single_node_metadata_log_is_not_reused_by_a_quorum_member(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "meta" / "__cluster_metadata-0"
    directory.mkdir(parents=True)
    (directory / f"{0:020d}.log").write_bytes(
        encode_batch(
            [FeatureLevelRecord("metadata.version", 25)], base_offset=0, epoch=1, timestamp=0
        )
    )
    voters = {1: Address("127.0.0.1", 9093), 2: Address("127.0.0.1", 9095)}
    config = _config(1, voters, tmp_path)
    with pytest.raises(MetadataError, match="holds a single-node metadata log"):
        await QuorumController.open(config)


async def test_a_broker_only_observer_follows_the_log_and_registers_remotely(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, observers=1) as c:
        active = await c.active()
        observer = c.nodes[4].running
        assert not observer.is_active
        assert observer.active_controller_id == active.node_id
        await c.register_all()  # the observer's broker through the active controller
        await c.until(lambda: all(len(n.image.brokers()) == 4 for n in c.running()))
        await active.create_topics(_create("observed"), 7)
        await c.until(lambda: observer.image.topic("observed") is not None)
        refused = await observer.create_topics(_create("not-here"), 7)
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER


async def test_a_voter_behind_the_snapshot_loads_it_and_catches_up(tmp_path: Path) -> None:
    """With a tiny snapshot interval every command is followed by a snapshot, so a voter that
    was down gets the image from FetchSnapshot rather than from the (dropped) log."""
    async with cluster(tmp_path, snapshot_interval=1) as c:
        active = await c.active()
        await c.register_all()
        behind = next(i for i in c.nodes if i != active.node_id)
        c.nodes[behind].crash()
        for name in ("s1", "s2", "s3"):
            created = await active.create_topics(_create(name), 7)
            assert created.topics[0].error_code == ErrorCode.NONE
        core = active.raft.core
        assert core is not None
        assert core.log.start_offset > 0
        await c.restart(behind)
        restarted = c.nodes[behind].running
        await c.until(lambda: all(restarted.image.topic(n) is not None for n in ("s1", "s2", "s3")))
        assert restarted.image.topics_by_name["s2"] == active.image.topics_by_name["s2"]
        assert len(restarted.image.brokers()) == 3


async def test_a_broker_registers_while_its_snapshot_loads_and_is_unfenced_once_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker-only node that joins after a snapshot fetches it and registers while it loads
    (its event loop runs: the load is held here until the registration is committed), stays
    fenced while its image is not caught up, and is unfenced once it is loaded, as Kafka's
    broker registers while it catches up."""
    loading, release, registered = trio.Event(), trio.Event(), trio.Event()
    load = QuorumController.load_snapshot
    register = BrokerLifecycle._register

    async def held(self: QuorumController, snapshot: SnapshotId, data: bytes) -> None:
        if self.node_id == 4:
            loading.set()
            await release.wait()
        await load(self, snapshot, data)

    async def registering(self: BrokerLifecycle, endpoints: list[Listener]) -> None:
        await register(self, endpoints)
        if self.node_id == 4:
            registered.set()

    monkeypatch.setattr(QuorumController, "load_snapshot", held)
    monkeypatch.setattr(BrokerLifecycle, "_register", registering)
    async with cluster(tmp_path, observers=1, snapshot_interval=1) as c:
        active = await c.active()
        observer = c.nodes[4]
        observer.crash()  # before it registered: it joins later
        for i in (1, 2, 3):
            await c.nodes[i].register()
        for name in ("s1", "s2"):
            created = await active.create_topics(_create(name), 7)
            assert created.topics[0].error_code == ErrorCode.NONE
        await active.snapshot()
        await observer.start(c.nursery, None)
        joining = observer.running
        async with trio.open_nursery() as nursery:
            nursery.start_soon(observer.register)
            await loading.wait()
            await registered.wait()  # the load is still held
            registration = active.image.broker(4)
            assert registration is not None
            assert registration.fenced
            lifecycle = joining.local_broker
            assert lifecycle.broker_epoch >= 0  # registered, the load still held
            fenced_while_loading = lifecycle.fenced
            assert joining.image.topic("s1") is None
            release.set()  # the load goes on; the registration task ends once unfenced
        assert fenced_while_loading
        assert not lifecycle.fenced
        assert joining.image.topics_by_name["s2"] == active.image.topics_by_name["s2"]
        unfenced = active.image.broker(4)
        assert unfenced is not None
        assert not unfenced.fenced


async def test_start_returns_once_the_nodes_own_image_shows_it_unfenced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat that unfences a broker is answered once its record is committed, which a
    follower voter may not have applied yet. `start` (after which the broker serves clients)
    waits until the node's own image shows it unfenced, so that its first Metadata answer lists
    itself (compat_tests/cluster/test_cluster.py saw an answer without it). Here the follower
    applies nothing after its own registration until released."""
    release = trio.Event()
    apply_slice = RaftDriver._apply_slice
    follower_id: list[int] = []

    def held(self: RaftDriver, core: RaftCore) -> bool:
        if [self.node_id] == follower_id and not release.is_set():
            controller = next(n for n in c.nodes.values() if n.node_id == self.node_id).running
            if controller.image.broker(self.node_id) is not None:
                return False  # registered: the unfence that follows stays unapplied
        return apply_slice(self, core)

    monkeypatch.setattr(RaftDriver, "_apply_slice", held)
    async with cluster(tmp_path) as c:
        active = await c.active()
        follower = next(n for n in c.nodes.values() if n.running is not active)
        follower_id.append(follower.node_id)
        started = trio.Event()

        async def start() -> None:
            await follower.register()
            started.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(start)
            await c.until(lambda: follower.running.image.broker(follower.node_id) is not None)
            lifecycle = follower.running.local_broker
            await c.until(lambda: not lifecycle.fenced)  # the heartbeat said unfenced
            assert not started.is_set()  # its own image still has it fenced
            release.set()
            follower.running.raft._apply_ready.set()
        registration = follower.running.image.broker(follower.node_id)
        assert registration is not None
        assert not registration.fenced


async def test_a_snapshot_loads_with_the_collector_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a snapshot builds its whole image (a million partitions: a million objects),
    so the cyclic collector is paused while it loads (`strom.broker.collector`) and is back
    on once it is loaded."""
    paused: list[bool] = []
    step = SnapshotLoader.step

    def stepping(self: SnapshotLoader, budget: int) -> bool:
        paused.append(not gc.isenabled())
        return step(self, budget)

    monkeypatch.setattr(SnapshotLoader, "step", stepping)
    async with cluster(tmp_path, observers=1, snapshot_interval=1) as c:
        active = await c.active()
        observer = c.nodes[4]
        observer.crash()  # it joins after the snapshot, and loads it
        for i in (1, 2, 3):
            await c.nodes[i].register()
        created = await active.create_topics(_create("s1"), 7)
        assert created.topics[0].error_code == ErrorCode.NONE
        await active.snapshot()
        await observer.start(c.nursery, None)
        joining = observer.running
        await c.until(lambda: joining.image.topic("s1") is not None)
    assert paused  # it loaded a snapshot
    assert all(paused)
    assert gc.isenabled()


async def test_the_first_leader_bootstraps_with_what_strom_format_chose(tmp_path: Path) -> None:
    async with cluster(tmp_path, bootstrap={"metadata.version": 20, "kraft.version": 0}) as c:
        await c.active()
        await c.until(lambda: all(n.image.metadata_version == 20 for n in c.running()))
        # one FeatureLevelRecord for metadata.version in the whole log: written once
        for node in c.running():
            core = node.raft.core
            assert core is not None
            versions = [
                e.offset
                for e in core.log.entries_from(core.log.start_offset, 1 << 20)
                if not e.control and b"metadata.version" in e.data
            ]
            assert len(versions) == 1


async def test_a_broker_that_stops_heartbeating_is_fenced_on_every_node(tmp_path: Path) -> None:
    async with cluster(tmp_path, broker_session_timeout_ms="600") as c:
        active = await c.active()
        await c.register_all()
        silent = next(i for i in c.nodes if i != active.node_id)
        for node in c.running():
            if node.node_id != silent:
                c.nursery.start_soon(node.local_broker.run)

        def fenced(node: QuorumController, broker_id: int) -> bool:
            registration = node.image.broker(broker_id)
            return registration is not None and registration.fenced

        await c.until(lambda: all(fenced(n, silent) for n in c.running()))
        assert not any(fenced(n, active.node_id) for n in c.running())


async def test_entries_say_how_many_of_their_command_follow() -> None:
    records = [
        FeatureLevelRecord("metadata.version", 20),
        FeatureLevelRecord("group.version", 1),
    ]
    entries = encode_entries(records, 1_700_000_000_000)
    decoded = [decode_entry(e) for e in entries]
    assert [(remaining, ts) for remaining, ts, _ in decoded] == [
        (1, 1_700_000_000_000),
        (0, 1_700_000_000_000),
    ]
    assert [r for _, _, r in decoded] == records
    with pytest.raises(MetadataError):
        decode_entry(entries[0][:5])
    with pytest.raises(MetadataError, match="not a metadata snapshot"):
        decode_snapshot(b"XXXX" + bytes(20))


async def test_a_command_cut_short_by_a_leader_change_is_dropped_not_half_applied(
    tmp_path: Path,
) -> None:
    """A follower fetched the first entries of a large command, the high watermark passed
    them, and the leader failed before anyone else had the rest: the next leader's entries
    follow the committed prefix. The replica drops the prefix (it never sees the command's
    last entry) instead of prepending it to the next command."""
    config = _config(1, {1: Address("127.0.0.1", 1), 2: Address("127.0.0.1", 2)}, tmp_path)
    _format(config, {})
    node = await QuorumController.open(config)
    cut = encode_entries(
        [FeatureLevelRecord("group.version", 1), FeatureLevelRecord("metadata.version", 20)], 1
    )
    whole = encode_entries([FeatureLevelRecord("metadata.version", 21)], 2)
    node.apply([Entry(0, 1, cut[0], False)])  # the committed prefix: held, not applied
    assert node.image.features == {}
    node.apply([Entry(1, 2, b"", True), Entry(2, 2, whole[0], False)])
    assert dict(node.image.features) == {"metadata.version": 21}  # no group.version
    assert node.image.provenance.offset == 2


# --- a leader cut off from the quorum ----------------------------------------------------------


def _isolate(controller: QuorumController) -> None:
    """Cut `controller`'s node off from the other voters, both ways: its Raft requests are
    dropped, and requests reaching it are never answered (the sender's request times out)."""
    driver = controller.raft
    send = driver._send

    def drop_requests(dest: int, message: Any) -> None:
        if isinstance(message, Request):
            return
        send(dest, message)

    async def never_answer(request: Request) -> Any:
        await trio.sleep_forever()

    driver._send = drop_requests  # type: ignore[method-assign]
    driver.answer = never_answer  # type: ignore[method-assign]


async def test_a_cut_off_leader_stops_answering_as_controller_and_frees_its_queue(
    tmp_path: Path,
) -> None:
    """A command the cut-off leader appended can never commit: it answers NOT_CONTROLLER once
    the leader resigns (check-quorum), and the commands queued behind it are not stuck; a
    heartbeat, which writes nothing, is not answered from the stale image (Kafka's controller
    answers heartbeats only as the active controller)."""
    async with cluster(tmp_path) as c:
        active = await c.active()
        await c.register_all()
        broker = c.nodes[active.node_id].running.broker_epoch
        _isolate(active)
        answers: dict[str, Any] = {}

        async def create() -> None:
            answers["create"] = await active.create_topics(_create("cut-off"), 7)

        with trio.fail_after(10):
            c.nursery.start_soon(create)
            await c.until(lambda: not active.is_active)  # it resigned: no fetches from a majority
            heartbeat = await active.broker_heartbeat(
                BrokerHeartbeatRequest(broker_id=active.node_id, broker_epoch=broker)
            )
            assert heartbeat.error_code == ErrorCode.NOT_CONTROLLER
            await c.until(lambda: "create" in answers)
        assert [t.error_code for t in answers["create"].topics] == [ErrorCode.NOT_CONTROLLER]


async def test_a_command_queued_behind_one_that_cannot_commit_times_out(tmp_path: Path) -> None:
    """While the cut-off leader still leads (before check-quorum), a heartbeat queued behind an
    uncommittable command answers REQUEST_TIMED_OUT at its deadline (half the heartbeat
    interval, as Kafka's controller gives it) instead of waiting for it."""
    async with cluster(
        tmp_path,
        broker_heartbeat_interval_ms="100",
        controller_quorum_fetch_timeout_ms="5000",
        controller_quorum_election_timeout_ms="2500",
    ) as c:
        active = await c.active()
        await c.register_all()
        broker = c.nodes[active.node_id].running.broker_epoch
        _isolate(active)
        c.nursery.start_soon(active.create_topics, _create("cut-off"), 7)
        await trio.testing.wait_all_tasks_blocked()  # it is appended and waits to commit
        with trio.fail_after(3):
            heartbeat = await active.broker_heartbeat(
                BrokerHeartbeatRequest(broker_id=active.node_id, broker_epoch=broker)
            )
        assert heartbeat.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert active.is_active, "still leading: check-quorum has not run out yet"


async def test_a_command_succeeds_only_if_the_entry_committed_at_its_offset_is_its_own(
    tmp_path: Path,
) -> None:
    """A command waits until its last offset is published; if another leader's entry was
    committed there (this one's were overwritten), it must not answer success. On sockets the
    waiting command is always woken by the epoch change first, so the host is driven by hand
    here: the overwrite is published in the same wake-up as the epoch change, which is what a
    check of the offset alone (before the epoch) gets wrong."""
    voters = {1: Address("127.0.0.1", 9093), 2: Address("127.0.0.1", 9095)}
    config = _config(1, voters, tmp_path)
    await trio.to_thread.run_sync(_format, config, {"metadata.version": 25})
    controller = await QuorumController.open(config)
    driver = controller.raft
    # a one-voter core leads epoch 1 at once; its writes are never performed, so nothing it
    # appends commits on its own
    driver.core = RaftCore(1, frozenset({1}), RecoveredState(QuorumState()), Random(0), 0)
    driver._drain()
    assert (driver.epoch, driver.leader_id) == (1, 1)
    controller._active_epoch = 1
    mine = FeatureLevelRecord("metadata.version", 20)
    theirs = FeatureLevelRecord("metadata.version", 21)
    answers: list[object] = []

    async def command() -> None:
        try:
            answers.append(await controller._run_command(lambda _: ControllerResult("ok", [mine])))
        except NotActiveController:
            answers.append(NotActiveController)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(controller._publish_loop)
        nursery.start_soon(command)
        await trio.testing.wait_all_tasks_blocked()
        assert driver.core.log.entry(1) is not None, "proposed after the leader's entry"
        # leader 2 of epoch 2 wrote its own entries at offsets 0 and 1, and they committed
        driver.epoch, driver.leader_id = 2, 2
        controller.apply(
            [
                Entry(0, 2, b"", control=True),
                Entry(1, 2, encode_entries([theirs], 0)[0]),
            ]
        )
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert controller.image.metadata_version == 21
    assert answers == [NotActiveController]
