"""A Strom cluster as child `strom serve` processes, for tests: combined or split roles.

    with ClusterProcess(tmp_path, combined=3) as cluster:   # 3 x process.roles=broker,controller
        Producer({"bootstrap.servers": cluster.bootstrap})
        cluster.node(2).kill9(); cluster.node(2).restart()

    with ClusterProcess(tmp_path, controllers=3, brokers=2) as cluster:   # split roles
        ...

A static quorum (`controller.quorum.voters=1@host:port,...`) needs every voter's controller port
in every node's configuration before any node starts, and tests never guess ports. So this
process binds each node's listeners itself (127.0.0.1, port 0), writes the real ports into the
configurations, and hands the sockets to the children by socket activation
(`strom.broker.testing.activated_child`). It keeps the listening sockets for the cluster's life, so a
restarted node inherits the same ports. While a node is down its sockets stop listening (a
connection is refused, as to a dead machine, instead of waiting in a queue nobody accepts from)
but stay bound to their ports (Linux releases a port the kernel chose when listening stops; the
socket binds it again at once), so nothing else takes them before the restart.

Network partitions (`partitionable=True`; `cluster.partition(node)`, `partition_halves(a, b)`,
`cut(sources, destinations)`, `heal()`): every node listener gets a proxy of this process in front
of it (`strom.broker.testing.network`), which `advertised.listeners` and `controller.quorum.voters`
name, so every connection between two nodes crosses a link the harness can cut; a cut holds the
bytes, as a dropped link does. Proxies rather than network namespaces: they need no privileges, no
iptables and no host network state to clean up, keep ports kernel-chosen, and behave the same in
CI containers (which often lack CAP_NET_ADMIN) as on a developer's machine; the test's own
clients stay able to reach every node.

Every node's storage is formatted with one shared cluster id (`strom format`), as an operator
does. A node is up when its "Strom ... started" log line appears; the cluster is ready when
every broker's Metadata lists every broker (`wait_for_brokers`). Nothing sleeps to synchronise:
it reads the logs, and polls what it waits for against a deadline. Each node
keeps its last log lines (`ClusterNode.output`; `ClusterProcess.report()` for a failure
report). Leaving the `with` block stops every node, one at a time (SIGTERM, then SIGKILL after a grace period)
and closes every socket, also when the test failed.
"""

from __future__ import annotations

import contextlib
import errno
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import trio

from strom.broker.security.sasl_client import SaslClient, SaslLoginError
from strom.broker.testing.activated_child import BACKLOG, listening_socket, popen_activated
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import child_environment
from strom.broker.testing.faults import FaultControl
from strom.broker.testing.network import Network
from strom.config.planted import ENV as PLANTED_ENV
from strom.storage.disk.journal import JOURNAL_ENV, ROOT_ENV, power_cut
from strom.storage.disk.model import Keep
from strom.storage.meta_properties import new_cluster_id
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from strom.wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

CLIENT_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
HOST = "127.0.0.1"

T = TypeVar("T")
_STARTED = re.compile(r"Strom \S+ started: .*?listeners=(?P<listeners>\S+)")
_METRICS = re.compile(r" metrics=http://(?P<address>[^\s\"]+)")
_SERVING = re.compile(r"The broker is unfenced and serving")


class ClusterError(RuntimeError):
    """A node did not start or stop as asked; the message carries its last log lines."""


class ClusterNode:
    """One `strom serve` child of a cluster, with the listening sockets it inherits."""

    def __init__(
        self, node_id: int, roles: tuple[str, ...], data_dir: Path, sockets: dict[str, socket.socket]
    ) -> None:
        self.node_id = node_id
        self.roles = roles
        self.data_dir = data_dir
        self.sockets = sockets
        """Listener name -> this process's listening socket (kept across restarts)."""
        self.ports = {name: int(sock.getsockname()[1]) for name, sock in sockets.items()}
        """Listener name -> port (also known once the sockets are closed)."""
        self.fronts: dict[str, int] = {}
        """Listener name -> port of its front (`ClusterProcess(partitionable=True)`): the port
        other nodes and clients reach it on (advertised.listeners)."""
        self.overrides: dict[str, str] = {}
        self.environment: dict[str, str] = {}
        """Extra environment of the child (e.g. the journaling disk of `power_cut`)."""
        self.process: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=5000)
        """The node's last log lines, across restarts."""
        self.watchers: list[Callable[[int, str], None]] = []
        """Each sees every log line (node id, line), from the reader thread: for a run longer
        than `output` keeps."""
        self.starts = 0
        self._serving_start = 0
        """The start whose process logged that it is unfenced and serving (see `serving`)."""
        self.metrics_address = ""
        """host:port of the node's metrics listener (with `metrics.listener` set), once up."""
        self.faults = FaultControl(f"node-{node_id}")
        """This node's request fault rules (`strom.broker.testing.faults`)."""
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._listening = True
        self._closed = False
        self._lost_port = ""

    # --- addresses ---------------------------------------------------------------------------

    def port(self, listener: str) -> int:
        """The port the node listens on."""
        return self.ports[listener]

    def advertised_port(self, listener: str) -> int:
        """The port others reach the listener on: its front's if it has one, else its own."""
        return self.fronts.get(listener) or self.ports[listener]

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def bootstrap(self) -> str:
        """host:port of this node's client listener (as advertised)."""
        return f"{HOST}:{self.advertised_port(CLIENT_LISTENER)}"

    @property
    def controller_address(self) -> str:
        """host:port of this node's controller listener (as advertised)."""
        return f"{HOST}:{self.advertised_port(CONTROLLER_LISTENER)}"

    @property
    def pid(self) -> int:
        return self._require().pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def serving(self) -> bool:
        """Its current process (not an earlier one) said it is unfenced and serving: its
        registration is in the metadata, so whatever that registration changed is too (a
        broker restarted after a crash leaves every ISR there), and it has caught up with the
        metadata. Until then the metadata may still count its previous incarnation in ISRs."""
        return self.alive and self._serving_start == self.starts

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the child (without waiting for it: see `wait_started`)."""
        if self.alive:
            raise ClusterError(f"node {self.node_id} is already running")
        args = [sys.executable, "-m", "strom", "serve"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        with self._lock:
            if self._closed or self._lost_port:
                raise ClusterError(f"node {self.node_id} cannot start: {self._lost_port or 'closed'}")
            if not self._listening:
                for sock in self.sockets.values():
                    sock.listen(BACKLOG)
                self._listening = True
            self.starts += 1
            if self.starts > 1:
                self.output.append(f"--- node {self.node_id}: start {self.starts} ---")
            self._started = threading.Event()
            environment = {
                **child_environment(), **self.faults.environment(), **self.environment
            }
            process = popen_activated(args, list(self.sockets.items()), environment)
            self.process = process
            started, generation = self._started, self.starts
        threading.Thread(
            target=self._drain, args=(process, started, generation), daemon=True,
            name=f"strom-node-{self.node_id}",
        ).start()  # fmt: skip

    def wait_started(self, timeout: float = 30.0) -> None:
        """Wait for the node's "started" log line; `ClusterError` with its log if it exits or
        the timeout passes first."""
        started = self._started.wait(timeout)
        code = self._require().poll()
        if code is not None:
            why = f"exited with code {code} before starting"
        elif not started:
            why = f"did not start within {timeout:.1f}s"
        else:
            return
        raise ClusterError(f"node {self.node_id} {why}; its output:\n{self.tail(40)}")

    def _drain(self, process: subprocess.Popen[str], started: threading.Event, generation: int) -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.rstrip("\n")
            self.output.append(line)
            for watcher in self.watchers:
                watcher(self.node_id, line)
            if _SERVING.search(line):
                self._serving_start = generation
            if not started.is_set() and _STARTED.search(line):
                metrics = _METRICS.search(line)
                self.metrics_address = metrics.group("address") if metrics else ""
                started.set()
        process.stderr.close()
        process.wait()
        with self._lock:
            if generation == self.starts:
                self._stop_listening()
        started.set()  # wake a waiter: the process is gone

    def _stop_listening(self) -> None:
        """After the child is gone: refuse connections, but keep the port (caller holds the lock)."""
        if not self._listening or self._closed:
            return
        self._listening = False
        for sock in self.sockets.values():
            address = sock.getsockname()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)  # leaves the listening state (Linux)
            try:
                # The kernel releases a port it chose (bound as port 0) when listening ends:
                # take it again. A port bound explicitly stays bound (EINVAL: already bound).
                sock.bind(address)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    self._lost_port = f"its port {address[1]} was taken while it was down ({exc})"

    def close_sockets(self) -> None:
        """Close this node's listening sockets (the cluster is done with the node)."""
        with self._lock:
            self._closed = True
            for sock in self.sockets.values():
                sock.close()
        self.faults.close()

    def kill9(self) -> None:
        """SIGKILL: a crash or power loss, as far as this node's storage knows."""
        process = self._require()
        if process.poll() is None:
            process.kill()
        process.wait()
        self._after_exit()

    @property
    def journal(self) -> Path:
        """Where its journaling disk journals (`ClusterProcess(power_cuts=True)`)."""
        return self.data_dir.parent / f"node-{self.node_id}.journal"

    @property
    def journaled(self) -> Path:
        """What its journaling disk journals: the partition logs (its log.dirs)."""
        return self.data_dir / "data"

    def power_cut(self, rng: random.Random, *, keep: Keep = "random") -> str:
        """SIGKILL, then what a power loss does to its disk: what it had not fsynced is lost
        (wholly with keep="none", else in part, the last write maybe torn). Needs
        `ClusterProcess(power_cuts=True)`. Returns what the cut did, in one line."""
        if JOURNAL_ENV not in self.environment:
            raise ClusterError(f"node {self.node_id} runs without a journaling disk")
        self.kill9()
        if not self.journal.exists():
            return f"node {self.node_id}: nothing journaled yet"
        return power_cut(self.journal, self.journaled, rng, keep=keep)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        process = self._require()
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused node must be able to act on SIGTERM
            process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ClusterError(
                f"node {self.node_id} did not stop within {timeout}s of SIGTERM; its output:\n"
                f"{self.tail(40)}"
            ) from None
        self._after_exit()
        return code

    def _after_exit(self) -> None:
        with self._lock:
            self._stop_listening()

    def pause(self) -> None:
        """SIGSTOP: the node stops answering but keeps its connections (a long GC pause, a
        hung machine)."""
        self._require().send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        self._require().send_signal(signal.SIGCONT)

    def restart(self, clean: bool = True, timeout: float = 30.0) -> None:
        """Stop (SIGTERM, or SIGKILL with clean=False), start on the same sockets, wait until
        started."""
        if self.alive:
            if clean:
                self.stop()
            else:
                self.kill9()
        self.start()
        self.wait_started(timeout)

    def tail(self, lines: int = 100) -> str:
        return "\n".join(list(self.output)[-lines:])

    def _require(self) -> subprocess.Popen[str]:
        if self.process is None:
            raise ClusterError(f"node {self.node_id} was never started")
        return self.process


class ClusterProcess:
    """N `strom serve` children forming one cluster with a static controller quorum.

    `combined=N`: N nodes, each `process.roles=broker,controller` (all voters). Or
    `controllers=C, brokers=M`: C controller-only voters (ids 1..C) and M broker-only nodes
    (ids C+1..C+M); M may be 0, a controller quorum alone for brokers the caller brings
    (`bench/control_plane.py`). `overrides` apply to every node (e.g. shorter Raft timeouts),
    `node_overrides[id]` to one (e.g. `broker.rack`). A node's config can also be changed
    between restarts (`node.overrides`). `features`: levels `strom format --feature` finalizes
    (e.g. eligible.leader.replicas.version=1). `power_cuts`: every node's partition logs run
    on a journaling disk, so `node.power_cut()` can cut a node's power
    (strom.storage.disk.journal; the metadata log is not journaled). `planted`: fixed bugs
    every node puts back (strom.config.planted; tests that prove a check catches them).
    """

    def __init__(
        self,
        root: Path | None = None,
        *,
        combined: int = 0,
        controllers: int = 0,
        brokers: int = 0,
        overrides: Mapping[str, str] | None = None,
        node_overrides: Mapping[int, Mapping[str, str]] | None = None,
        start_timeout: float = 60.0,
        partitionable: bool = False,
        features: Mapping[str, int] | None = None,
        power_cuts: bool = False,
        planted: Iterable[str] = (),
        client_ssl: ssl.SSLContext | None = None,
        client_sasl: tuple[str, str, str] | None = None,
        format_args: Sequence[str] = (),
    ) -> None:
        self._own_root: Path | None = None
        if root is None:  # outside pytest: a temporary directory, removed by close()
            root = self._own_root = Path(tempfile.mkdtemp(prefix="strom-cluster-"))
        self.client_ssl = client_ssl
        """How the harness itself reaches client listeners that are TLS (None: plaintext)."""
        self.client_sasl = client_sasl
        """(mechanism, user, password) the harness authenticates with to SASL client listeners."""
        self.format_args = tuple(format_args)
        """More `strom format` arguments for every node (e.g. `--add-scram ...`)."""
        if combined and (controllers or brokers):
            raise ValueError("either combined nodes, or controllers and brokers")
        if not combined and controllers < 1:
            raise ValueError("a cluster needs combined nodes, or controllers (and brokers)")
        self.root = root
        self.features = dict(features or {})
        self.start_timeout = start_timeout
        self.cluster_id = new_cluster_id()
        self.nodes: list[ClusterNode] = []
        self.network: Network | None = None
        """With partitionable=True: the fronts every connection to a node goes through."""
        roles_of = (
            [("broker", "controller")] * combined
            if combined
            else [("controller",)] * controllers + [("broker",)] * brokers
        )
        try:
            for node_id, roles in enumerate(roles_of, start=1):
                sockets = {}
                if "broker" in roles:
                    sockets[CLIENT_LISTENER] = listening_socket(HOST)
                if "controller" in roles:
                    sockets[CONTROLLER_LISTENER] = listening_socket(HOST)
                self.nodes.append(ClusterNode(node_id, roles, root / f"node-{node_id}", sockets))
            if partitionable:
                self.network = Network(self._pids)
                for node in self.nodes:
                    for name, port in node.ports.items():
                        node.fronts[name] = self.network.front(node.node_id, (HOST, port), name)[1]
        except BaseException:
            self._close_sockets()
            raise
        self.voters = ",".join(
            f"{n.node_id}@{n.controller_address}" for n in self.nodes if n.is_controller
        )
        """controller.quorum.voters as clients and tools see it (the advertised addresses); a
        partitionable node names itself at its own listener (`_voters_for`)."""
        for node in self.nodes:
            node.overrides = {
                **self._node_config(node),
                **(overrides or {}),
                **(node_overrides or {}).get(node.node_id, {}),
            }
            if power_cuts:
                node.environment = {
                    JOURNAL_ENV: str(node.journal), ROOT_ENV: str(node.journaled)
                }
            if planted:
                node.environment[PLANTED_ENV] = ",".join(planted)
        self.format_seconds = 0.0
        """How long `strom format` took (every node in parallel)."""
        self.startup_seconds = 0.0
        """From starting the first node to the last node's "started" line."""
        self.ready_seconds = 0.0
        """From starting the first node until every broker's Metadata lists every broker."""

    def _node_config(self, node: ClusterNode) -> dict[str, str]:
        listeners = ",".join(f"{name}://{HOST}:{node.port(name)}" for name in node.sockets)
        return {
            "process.roles": ",".join(node.roles),
            "node.id": str(node.node_id),
            "controller.quorum.voters": self._voters_for(node),
            "controller.listener.names": CONTROLLER_LISTENER,
            "listeners": listeners,
            **({"advertised.listeners": ",".join(
                f"{name}://{HOST}:{port}" for name, port in node.fronts.items()
            )} if node.fronts else {}),
            **({"inter.broker.listener.name": CLIENT_LISTENER} if node.is_broker else {}),
            "log.dirs": str(node.data_dir / "data"),
            "metadata.log.dir": str(node.data_dir / "metadata"),
            "group.initial.rebalance.delay.ms": "0",
        }

    def _voters_for(self, node: ClusterNode) -> str:
        """controller.quorum.voters as `node` has it: every voter at its advertised address
        (its front, when partitionable), but the node itself at its own listener (a node never
        crosses a link to reach itself, and its voters entry must name its own listener)."""
        return ",".join(
            f"{n.node_id}@{HOST}:{n.port(CONTROLLER_LISTENER)}"
            if n is node
            else f"{n.node_id}@{n.controller_address}"
            for n in self.nodes
            if n.is_controller
        )

    # --- what tests use ----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every broker's client endpoint, comma-separated (bootstrap.servers)."""
        return ",".join(n.bootstrap for n in self.brokers)

    @property
    def bootstrap_controllers(self) -> str:
        """Every controller's endpoint (`--bootstrap-controller`,
        controller.quorum.bootstrap.servers)."""
        return ",".join(n.controller_address for n in self.controllers)

    @property
    def brokers(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.is_controller]

    def node(self, node_id: int) -> ClusterNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id} (nodes: {[n.node_id for n in self.nodes]})")

    # --- network partitions (partitionable=True) ----------------------------------------------

    def partition(self, *nodes: int | ClusterNode) -> None:
        """Isolate these nodes (one side, together) from every other node, both ways. Clients of
        the test still reach every node."""
        inside = _ids(nodes)
        self.partition_halves(inside, [n.node_id for n in self.nodes if n.node_id not in inside])

    def partition_halves(
        self, a: Iterable[int | ClusterNode], b: Iterable[int | ClusterNode], listener: str = ""
    ) -> None:
        """Cut every link between a node of `a` and a node of `b`, both ways (a node in neither
        keeps its links to both: a bridge); `listener`: only connections to that listener
        (CLIENT_LISTENER: the replica fetches between brokers, while Raft, heartbeats and
        AlterPartition, on the controller listeners, flow)."""
        side_a, side_b = _ids(a), _ids(b)
        self._require_network().cut(side_a, side_b, listener)
        self._require_network().cut(side_b, side_a, listener)

    def cut(
        self,
        sources: Iterable[int | ClusterNode],
        destinations: Iterable[int | ClusterNode],
        listener: str = "",
    ) -> None:
        """Cut one way: bytes from `sources` to `destinations` are held, the reverse flows
        (`listener`: only on connections to that listener name)."""
        self._require_network().cut(_ids(sources), _ids(destinations), listener)

    def heal_between(
        self, a: Iterable[int | ClusterNode], b: Iterable[int | ClusterNode], listener: str = ""
    ) -> None:
        """Undo `partition_halves(a, b, listener)` only: other cuts stay."""
        side_a, side_b = _ids(a), _ids(b)
        self._require_network().restore(side_a, side_b, listener)
        self._require_network().restore(side_b, side_a, listener)

    def heal(self) -> None:
        """Every cut link carries bytes again (the held ones first)."""
        self._require_network().heal()

    def _require_network(self) -> Network:
        if self.network is None:
            raise ClusterError("network partitions need ClusterProcess(partitionable=True)")
        return self.network

    # --- faults on demand (kfake's control API, on real processes) ----------------------------

    def _targets(self, node: int | ClusterNode | None) -> list[ClusterNode]:
        if node is None:
            return [n for n in self.brokers if n.alive]
        return [node if isinstance(node, ClusterNode) else self.node(node)]

    def fail(
        self,
        api: str | int,
        error: str | int,
        *,
        count: int | None = 1,
        topic: str | None = None,
        partition: int | None = None,
        node: int | ClusterNode | None = None,
    ) -> None:
        """Make the next `count` requests of `api` (Kafka's name: "Produce", "JoinGroup", ...)
        fail with `error` (its name: "NOT_LEADER_OR_FOLLOWER", ...), on `node` or on every
        live broker, for `topic` (and `partition`) only if given; count=None: until
        `clear_faults`. Produce does not append the failed partitions; see
        `strom.broker.network.faults` for what each API answers."""
        for target in self._targets(node):
            target.faults.add(api, error=error, count=count, topic=topic, partition=partition)

    def delay(
        self,
        api: str | int,
        ms: int,
        *,
        count: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        node: int | ClusterNode | None = None,
    ) -> None:
        """Answer the next `count` requests of `api` `ms` milliseconds late (count=None: every
        one until `clear_faults`)."""
        for target in self._targets(node):
            target.faults.add(api, delay_ms=ms, count=count, topic=topic, partition=partition)

    def clear_faults(self, node: int | ClusterNode | None = None) -> None:
        """Remove every fault rule (of `node`, or of every live broker)."""
        for target in self._targets(node):
            target.faults.clear()

    def kill(self, node: int | ClusterNode) -> None:
        """SIGKILL the node (a crash); `restart` brings it back."""
        self._one(node).kill9()

    def stop(self, node: int | ClusterNode) -> None:
        """SIGTERM the node and wait (a clean shutdown); `restart` brings it back."""
        self._one(node).stop()

    def pause(self, node: int | ClusterNode) -> None:
        """SIGSTOP: the node hangs, its connections stay open; `resume` lets it go on."""
        self._one(node).pause()

    def resume(self, node: int | ClusterNode) -> None:
        self._one(node).resume()

    def restart(self, node: int | ClusterNode, timeout: float = 60.0) -> None:
        """Start a stopped or killed node again (a running one is stopped cleanly first) on
        its ports and data, and wait until every broker sees every broker."""
        target = self._one(node)
        target.restart(clean=True, timeout=timeout)
        self.wait_for_brokers(timeout)

    def isolate(self, node: int | ClusterNode) -> None:
        """Cut the node off from every other node, both ways (needs partitionable=True); the
        test's own clients still reach it. `heal` reconnects it."""
        self.partition(node)

    def _one(self, node: int | ClusterNode) -> ClusterNode:
        return node if isinstance(node, ClusterNode) else self.node(node)

    def leader(
        self, topic: str, partition: int = 0, timeout: float = 30.0, other_than: int | None = None
    ) -> int:
        """The partition's leader as the brokers' Metadata says, waiting while there is none
        (or while it is `other_than`: e.g. the node just killed, until the controller has
        fenced it, `broker.session.timeout.ms`, and elected another)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._partition_metadata(topic, partition)
            if found is not None and found.leader_id >= 0 and found.leader_id != other_than:
                return found.leader_id
            if time.monotonic() >= deadline:
                raise ClusterError(f"{topic}-{partition} has no new leader after {timeout}s")
            time.sleep(0.05)  # polling what we wait for, against the deadline

    def move_leader(self, topic: str, partition: int, to: int, timeout: float = 30.0) -> None:
        """Make broker `to` (a replica in the ISR) the partition's leader, as an operator does:
        reorder the replicas so it is the preferred one (AlterPartitionReassignments), then
        elect the preferred leader (ElectLeaders); returns once the brokers report it."""
        found = self._partition_metadata(topic, partition)
        if found is None:
            raise ClusterError(f"no partition {topic}-{partition}")
        if found.leader_id == to:
            return
        if to not in found.isr_nodes:
            raise ClusterError(
                f"broker {to} is not in the ISR {list(found.isr_nodes)} of {topic}-{partition}"
            )
        replicas = [to, *(r for r in found.replica_nodes if r != to)]
        self._admin(_reorder_and_elect(topic, partition, replicas))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self._partition_metadata(topic, partition)
            if now is not None and now.leader_id == to:
                return
            time.sleep(0.05)  # polling what we wait for, against the deadline
        raise ClusterError(f"{topic}-{partition} is not led by {to} after {timeout}s")

    def wait_for_group(self, group: str, state: str, timeout: float = 30.0) -> None:
        """Until consumer group `group` is in `state` ("Stable", "Empty",
        "PreparingRebalance", "CompletingRebalance", "Dead"), as DescribeGroups reports it."""
        deadline = time.monotonic() + timeout
        seen = "?"
        while True:
            seen = self._admin(_group_state(group))
            if seen == state:
                return
            if time.monotonic() >= deadline:
                raise ClusterError(f"group {group} is {seen}, not {state}, after {timeout}s")
            time.sleep(0.05)  # polling what we wait for, against the deadline

    def _partition_metadata(self, topic: str, partition: int) -> MetadataResponse.MetadataResponsePartition | None:
        async def ask(client: KafkaClient) -> MetadataResponse.MetadataResponsePartition | None:
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False,
            )
            response = await client.request(request, 12, MetadataResponse)
            for t in response.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == partition:
                        return p
            return None

        return self._admin(ask)

    def _admin(self, ask: Callable[[KafkaClient], Awaitable[T]]) -> T:
        """Run `ask` on a connection to the first live broker that answers."""
        failures = []
        for node in self.brokers:
            if not node.alive:
                continue

            async def run(address: str = node.bootstrap) -> T:
                with trio.fail_after(15):
                    client = await KafkaClient.connect(address, "strom-cluster-harness")
                    try:
                        return await ask(client)
                    finally:
                        await client.aclose()

            try:
                return trio.run(run)
            except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError) as exc:
                failures.append(f"node {node.node_id}: {type(exc).__name__}: {exc}")
        raise ClusterError("no live broker answered: " + "; ".join(failures))

    def report(self, lines: int = 200) -> str:
        """Every node's last log lines, for a failure report."""
        return "\n".join(
            f"===== node {n.node_id} ({','.join(n.roles)}) pid "
            f"{n.process.pid if n.process else '-'} =====\n{n.tail(lines)}"
            for n in self.nodes
        )

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Format every node's storage with the cluster id, start every node, wait for each
        one's "started" line and then for every broker to see every broker (`wait_for_brokers`)."""
        begun = time.monotonic()
        self.format()
        formatted = time.monotonic()
        self.format_seconds = formatted - begun
        for node in self.nodes:
            node.start()
        deadline = begun + self.start_timeout
        for node in self.nodes:
            node.wait_started(max(0.0, deadline - time.monotonic()))
        self.startup_seconds = time.monotonic() - formatted
        self.wait_for_brokers(max(0.0, deadline - time.monotonic()))
        self.ready_seconds = time.monotonic() - formatted

    def wait_for_brokers(self, timeout: float = 30.0) -> None:
        """Until every live broker's Metadata lists every live broker: each has registered with
        the active controller and sees the others, so a client can use any of them."""
        deadline = time.monotonic() + timeout
        seen: dict[int, set[int] | str] = {}
        while True:
            live = [n for n in self.brokers if n.alive]
            wanted = {n.node_id for n in live}
            for node in live:
                seen[node.node_id] = _listed_brokers(
                    node.bootstrap, self.client_ssl, self.client_sasl
                )
            if all(seen[n.node_id] == wanted for n in live):
                return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"brokers {sorted(wanted)} did not all see each other within {timeout}s "
                    f"(each node's Metadata: {seen}); their output:\n{self.report(40)}"
                )
            time.sleep(0.05)  # polling what we wait for, against the deadline above

    def format(self) -> None:
        """`strom format --cluster-id ...` on every node, in parallel."""
        running = []
        for node in self.nodes:
            args = [sys.executable, "-m", "strom", "format", "--cluster-id", self.cluster_id,
                    "--ignore-formatted"]  # fmt: skip
            for key, value in node.overrides.items():
                args += ["--override", f"{key}={value}"]
            for name, level in sorted(self.features.items()):
                args += ["--feature", f"{name}={level}"]
            args += self.format_args
            running.append((node, subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env=child_environment(),
            )))  # fmt: skip
        failures = []
        for node, process in running:
            out, _ = process.communicate(timeout=60)
            if process.returncode != 0:
                failures.append(f"node {node.node_id}: {out.strip()}")
        if failures:
            raise ClusterError("strom format failed: " + "; ".join(failures))

    def close(self, grace: float = 10.0) -> None:
        """Stop every node, one at a time (SIGTERM, SIGKILL after `grace` seconds), and close
        every socket.

        One at a time, as an operator stops a cluster: a broker stopped by SIGTERM first runs a
        controlled shutdown through the active controller, which needs a quorum of voters still
        running. Stopped all at once, the first nodes out take the quorum with them and the
        others wait for a controller that is gone (bounded, but seconds each); stopped in turn,
        each finds a controller, and the last, with no other broker left to lead, skips it.
        Brokers go before the controllers of a split cluster: a broker whose quorum is gone
        would wait out the whole grace period for an answer."""
        try:
            for node in sorted(self.nodes, key=lambda n: n.is_controller):
                if node.alive:
                    self._terminate([node.process], grace)
        finally:
            self._close_sockets()
            if self._own_root is not None:
                shutil.rmtree(self._own_root, ignore_errors=True)

    @staticmethod
    def _terminate(processes: Iterable[subprocess.Popen[str] | None], grace: float) -> None:
        live = [p for p in processes if p is not None]
        for process in live:
            process.send_signal(signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in live:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _close_sockets(self) -> None:
        if self.network is not None:
            self.network.close()
        for node in self.nodes:
            node.close_sockets()

    def _pids(self) -> dict[int, int]:
        return {n.node_id: n.process.pid for n in self.nodes if n.process is not None and n.alive}

    def __enter__(self) -> ClusterProcess:
        try:
            self.start()
        except BaseException:
            self.close(grace=0.0)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _listed_brokers(
    address: str,
    ssl_context: ssl.SSLContext | None = None,
    sasl: tuple[str, str, str] | None = None,
) -> set[int] | str:
    """The broker ids in this broker's Metadata answer (or why there is none)."""

    async def ask() -> set[int]:
        with trio.fail_after(5):
            client = await KafkaClient.connect(address, "strom-cluster-harness", ssl_context)
            try:
                if sasl is not None:
                    await client.login(SaslClient(*sasl))
                response = await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)
            finally:
                await client.aclose()
        return {b.node_id for b in response.brokers}

    try:
        return trio.run(ask)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError,
            SaslLoginError) as exc:  # fmt: skip
        return f"{type(exc).__name__}: {exc}"  # ssl.SSLError is an OSError


def _ids(nodes: Iterable[int | ClusterNode]) -> list[int]:
    return [n.node_id if isinstance(n, ClusterNode) else n for n in nodes]


def _reorder_and_elect(
    topic: str, partition: int, replicas: list[int]
) -> Callable[[KafkaClient], Awaitable[None]]:
    async def run(client: KafkaClient) -> None:
        reassign = AlterPartitionReassignmentsRequest(topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(topic, [
                AlterPartitionReassignmentsRequest.ReassignablePartition(partition, replicas)
            ])
        ])  # fmt: skip
        answer = await client.request(reassign, 0, AlterPartitionReassignmentsResponse)
        errors = [answer.error_code] + [p.error_code for t in answer.responses for p in t.partitions]
        if any(errors):
            raise ClusterError(f"AlterPartitionReassignments of {topic}-{partition}: "
                               f"{[ErrorCode(e).name for e in errors if e]}")  # fmt: skip
        elect = ElectLeadersRequest(
            election_type=0, topic_partitions=[ElectLeadersRequest.TopicPartitions(topic, [partition])]
        )
        elected = await client.request(elect, 2, ElectLeadersResponse)
        codes = [elected.error_code] + [
            p.error_code for r in elected.replica_election_results for p in r.partition_result
        ]
        codes = [c for c in codes if c not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]
        if codes:
            raise ClusterError(f"ElectLeaders of {topic}-{partition}: {[ErrorCode(c).name for c in codes]}")

    return run


def _group_state(group: str) -> Callable[[KafkaClient], Awaitable[str]]:
    async def run(client: KafkaClient) -> str:
        found = await client.request(
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4, FindCoordinatorResponse
        )
        (coordinator,) = found.coordinators
        if coordinator.error_code:
            return ErrorCode(coordinator.error_code).name
        there = await KafkaClient.connect(f"{coordinator.host}:{coordinator.port}", "strom-cluster-harness")
        try:
            described = await there.request(DescribeGroupsRequest(groups=[group]), 5, DescribeGroupsResponse)
        finally:
            await there.aclose()
        (state,) = described.groups
        if state.error_code:
            return ErrorCode(state.error_code).name
        return state.group_state

    return run
