"""The simulated cluster: real `Broker`s (strom.broker.process.app), each a task tree on its own
`SimRuntime`, their files on the shared `SimDisk`, their connections on the `SimNetwork`.

A node's life: `start` (a new incarnation: a new runtime, a fresh `Broker` from its config and
whatever its directory holds), `kill` (kill -9: sockets reset, disk calls refused from that
instant, the task tree cancelled; the files keep everything written, as the page cache does),
`power_cut` (a kill, and the disk of the node loses what was not fsynced, the last write
maybe torn: `MemoryDisk.power_cut`), `stop` (SIGTERM: the broker's own clean shutdown).
Every node is formatted as `strom format` does, with the cluster id and features of the
scenario.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from strom.broker import runtime
from strom.broker.process.app import Broker, StartupError
from strom.config import BrokerConfig, load_config
from strom.coordinator.controller.state_machine import LATEST_METADATA_VERSION
from strom.coordinator.metadata.image import METADATA_VERSION
from strom.coordinator.metadata.kraft_checkpoint import encode_bootstrap
from strom.storage.meta_properties import format_directories
from tests.simulation.machine import EPOCH_MS, SimDisk, SimRuntime, Skew
from tests.simulation.network import SimNetwork

log = logging.getLogger("strom.simulation")

CLIENT_PORT = 9092
CONTROLLER_PORT = 9093


@dataclass
class SimNode:
    node_id: int
    host: str
    root: Path
    properties: dict[str, str]
    skew: Skew = field(default_factory=Skew)
    incarnation: int = 0
    runtime: SimRuntime | None = None
    broker: Broker | None = None
    scope: trio.CancelScope | None = None
    exited: trio.Event = field(default_factory=trio.Event)
    serving: bool = False
    startup_error: str = ""

    @property
    def up(self) -> bool:
        return self.runtime is not None and self.runtime.alive

    @property
    def bootstrap(self) -> tuple[str, int]:
        return self.host, CLIENT_PORT


class SimCluster:
    def __init__(
        self,
        *,
        nodes: int,
        root: Path,
        net: SimNetwork,
        disk: SimDisk | None,
        rng: random.Random,
        trace: Callable[[str], None],
        cluster_id: str,
        overrides: dict[str, str] | None = None,
        features: dict[str, int] | None = None,
        disk_latency: Callable[[random.Random], float] = lambda _rng: 0.0,
        skews: list[Skew] | None = None,
    ) -> None:
        self.net = net
        self.disk = disk
        self.rng = rng
        self.trace = trace
        self.cluster_id = cluster_id
        self.disk_latency = disk_latency
        self.features = dict(features or {})
        voters = ",".join(f"{i}@node{i}:{CONTROLLER_PORT}" for i in range(1, nodes + 1))
        self.nodes: list[SimNode] = []
        for i in range(1, nodes + 1):
            host = f"node{i}"
            node_root = root / host
            properties = {
                "process.roles": "broker,controller",
                "node.id": str(i),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listeners": f"PLAINTEXT://{host}:{CLIENT_PORT},CONTROLLER://{host}:{CONTROLLER_PORT}",
                "inter.broker.listener.name": "PLAINTEXT",
                "log.dirs": str(node_root / "data"),
                "metadata.log.dir": str(node_root / "metadata"),
                "group.initial.rebalance.delay.ms": "0",
                "log.cleaner.enable": "false",
                **(overrides or {}),
            }
            skew = skews[i - 1] if skews else Skew()
            self.nodes.append(SimNode(i, host, node_root, properties, skew))
        self._nursery: trio.Nursery | None = None

    def node(self, node_id: int) -> SimNode:
        if not 1 <= node_id <= len(self.nodes):  # e.g. leader -1: not the list's last nodes
            raise KeyError(f"no node {node_id}")
        return self.nodes[node_id - 1]

    def config(self, node: SimNode) -> BrokerConfig:
        return load_config(extra=node.properties)

    def format(self) -> None:
        """`strom format` on every node, with the scenario's cluster id and features."""
        for node in self.nodes:
            config = self.config(node)
            format_directories(
                config.data_dirs,
                config.metadata_dir,
                cluster_id=self.cluster_id,
                node_id=node.node_id,
                new_uuid=lambda: uuid.UUID(int=self.rng.getrandbits(128), version=4),
                ignore_formatted=False,
                bootstrap=encode_bootstrap(
                    {**self.features, METADATA_VERSION: LATEST_METADATA_VERSION}, EPOCH_MS
                ),
                voters=(
                    frozenset(config.quorum_voters or {node.node_id})
                    if "controller" in config.roles
                    else None
                ),
            )
        if self.disk is not None:
            # the page cache writes the formatted directories back long before the first start
            for _path, entry in self.disk.model.walk(Path("/")):
                self.disk.model.sync(entry)

    # --- life cycle -------------------------------------------------------------------------

    def bind(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def start(self, node: SimNode) -> None:
        """A new incarnation of `node` (the previous one must have exited)."""
        assert self._nursery is not None
        assert not node.up, f"{node.host} is already running"
        assert node.exited.is_set() or node.incarnation == 0, f"{node.host} is still exiting"
        node.incarnation += 1
        rt = SimRuntime(
            node.host,
            self.net,
            random.Random(self.rng.getrandbits(64)),
            skew=node.skew,
            disk_latency=self.disk_latency,
            root=node.root,
        )
        node.runtime = rt
        node.broker = None
        node.serving = False
        node.startup_error = ""
        node.exited = trio.Event()
        node.scope = trio.CancelScope()
        self.trace(f"{node.host}: start (incarnation {node.incarnation})")
        self._nursery.start_soon(self._run, node, rt, node.scope, node.exited)

    async def _run(
        self, node: SimNode, rt: SimRuntime, scope: trio.CancelScope, exited: trio.Event
    ) -> None:
        try:
            with scope, runtime.running(rt):
                broker = node.broker = Broker(self.config(node))
                try:
                    async with trio.open_nursery() as inner:
                        await inner.start(broker.run)
                        if rt.alive:
                            node.serving = True
                            self.trace(f"{node.host}: serving")
                except StartupError as exc:
                    if rt.alive:
                        node.startup_error = str(exc)
                        self.trace(f"{node.host}: start-up failed: {exc}")
                        rt.life.alive = False
                        self.net.crash_host(rt.life)
        except BaseException as exc:
            if rt.alive and _only_os_errors(exc):
                # a storage failure the broker does not survive (an fsync or a write to the
                # metadata log failing): the process exits, as Kafka's halts; it is down
                # until restarted
                self.trace(f"{node.host}: crashed on a storage failure: {_leaf(exc)!r}")
                self.kill(node)
                return
            if rt.alive:
                raise
            if not _only_cancelled_or_io(exc):
                log.debug("%s: a killed incarnation ended with %r", node.host, exc)
        finally:
            if rt.alive:  # the broker returned by itself: a clean stop (or a failed start)
                rt.life.alive = False
                self.net.crash_host(rt.life)
            exited.set()

    def kill(self, node: SimNode) -> None:
        """kill -9: the process is gone at once; its page cache stays."""
        rt = node.runtime
        if rt is None or not rt.alive:
            return
        self.trace(f"{node.host}: killed")
        rt.life.alive = False
        self.net.crash_host(rt.life)
        if self.disk is not None:
            self.disk.close_all(node.root)
        assert node.scope is not None
        node.scope.cancel()
        node.serving = False

    def power_cut(self, node: SimNode, keep: str = "random") -> None:
        """The node's power goes: a kill, and its disk keeps only what was fsynced (and, of the
        rest, what the disk model lets survive: `keep` "random" or "none")."""
        self.kill(node)
        self.trace(f"{node.host}: power cut (unsynced data: {keep})")
        if self.disk is not None:
            self.disk.power_cut(random.Random(self.rng.getrandbits(64)), node.root, keep=keep)

    async def stop(self, node: SimNode, grace: float = 30.0) -> None:
        """SIGTERM: the broker's clean shutdown, killed if it takes longer than `grace`."""
        if not node.up or node.broker is None:
            return
        self.trace(f"{node.host}: stop")
        node.broker.shutdown()
        with trio.move_on_after(grace):
            await node.exited.wait()
        if not node.exited.is_set():
            self.trace(f"{node.host}: did not stop within {grace:.0f}s; killed")
            self.kill(node)
        node.serving = False

    async def restart(self, node: SimNode) -> None:
        """Start `node` again once its last incarnation has exited (if it is down)."""
        if node.up:
            return
        await self.wait_exited(node)
        if not node.up:
            self.start(node)

    async def wait_exited(self, node: SimNode) -> None:
        if node.incarnation:
            await node.exited.wait()


def _only_os_errors(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_os_errors(e) for e in exc.exceptions)
    return isinstance(exc, OSError) or (exc.__cause__ is not None and _only_os_errors(exc.__cause__))


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _only_cancelled_or_io(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_cancelled_or_io(e) for e in exc.exceptions)
    return isinstance(exc, trio.Cancelled | OSError | trio.BrokenResourceError | trio.ClosedResourceError)
