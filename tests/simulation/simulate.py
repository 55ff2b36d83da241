"""A seeded, deterministic simulation of a whole Strom cluster, in one process.

Three real brokers (`strom.broker.process.app.Broker`, combined broker and controller roles:
the Raft quorum, replication, the group and transaction coordinators) and the workload's
clients run on trio's virtual clock (`MockClock`, jumping to the next timer whenever every
task waits), in memory (`SimNetwork`, `SimDisk`), each process on its own
`strom.broker.runtime.Runtime` (skewed wall clock, inline worker threads, seeded randomness).
One seed decides everything: the scenario, every fault, every latency, every scheduling
choice trio makes, so a failing seed replays exactly, with a readable trace.

A run: format the nodes, start them, create the topic (3 replicas, `min.insync.replicas=2`),
run the workload (idempotent producers, a transactional producer, read_uncommitted and
read_committed readers, a group's offset commits) while the nemesis injects faults
(`nemesis.py`) and a monitor checks the live invariants; then heal everything, restart what is
down, wait for every replica to catch up, read everything back, compare every replica's log
batch by batch up to the high watermark, and judge the history (`checker.py`).

    python -m tests.simulation --seeds 200            # seeds 0..199, CI size, one line each
    python -m tests.simulation --seed 17              # replay one seed, the trace on stdout
    python -m tests.simulation --seeds 1000 --size nightly
    python -m tests.simulation --plant hw-ignores-followers --seeds 20 --stop-at-first

docs/simulation.md has the sizes, the faults, the checks and the numbers.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
import uuid
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import trio
import trio.testing

from strom.broker import runtime
from strom.broker.state import BrokerState
from strom.config import planted
from strom.coordinator.metadata.image import MetadataImage
from strom.coordinator.raft.states import Role
from strom.storage import disk
from strom.storage.log.partition import PartitionLog
from strom.storage.meta_properties import new_cluster_id
from strom.wire.errors import ErrorCode
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from strom.wire.records import iter_batches
from tests.simulation import client as clients
from tests.simulation.checker import History, Violation
from tests.simulation.cluster import SimCluster, SimNode
from tests.simulation.determinism import deterministic_scheduling
from tests.simulation.machine import EPOCH_MS, SimDisk, SimRuntime, Skew
from tests.simulation.nemesis import OPENINGS, FaultPlan, Nemesis
from tests.simulation.network import LinkProfile, SimNetwork

TOPIC = "sim"
GROUP = "sim-group"
TXN_GROUP = "sim-txn-group"
ROOT = Path("/sim")
MONITOR_EVERY = 0.05
CONVERGE_WITHIN = 120.0
"""After the heal, every replica must have caught up within this (virtual) time."""
RUN_LIMIT = 1200.0
"""A run that has not finished after this much virtual time is stuck."""
SPIN_LIMIT = 200_000
"""Task steps at one virtual instant after which a run is spinning (a busy loop: the virtual
clock never moves again, so RUN_LIMIT would never come)."""

CI_WEIGHTS = {
    "kill": 3, "kill-leader": 2, "power-cut": 2, "isolate": 2, "one-way": 2, "bridge": 1,
    "pause": 2, "stall": 1, "resets": 3, "clients-cut": 1, "slow-link": 1, "clock-jump": 1,
    "fsync-fails": 0.5, "disk-full": 0.5,
}  # fmt: skip
OPENING_CHANCE = 0.3
"""Seeds that open with a scripted sequence (`nemesis.OPENINGS`), drawn from a generator of
their own so that the other seeds run as they did before openings existed."""
OPENING_CHAOS = 75.0
"""The load and faults of a seed with an opening last at least this long (virtual seconds):
the longest opening takes about a minute, under load."""


@dataclass(frozen=True)
class Scenario:
    """What one seed runs (drawn from it by `for_seed`)."""

    seed: int
    chaos: float = 30.0
    """Virtual seconds of load and faults."""
    partitions: int = 2
    producers: int = 2
    transactions: bool = True
    readers: bool = True
    commits: bool = True
    elr: int = 1
    flush_every_message: bool = False
    faults: FaultPlan = field(default_factory=lambda: FaultPlan(dict(CI_WEIGHTS)))
    max_skew_ms: int = 5_000
    max_drift: float = 0.01
    disk_latency_ms: float = 2.0
    produce_interval: float = 0.05
    planted: frozenset[str] = frozenset()
    session_timeout_ms: int = 6_000
    """broker.session.timeout.ms: short, so that a long fault fences a broker; longer than
    the 30 s a partition leader retries an AlterPartition in the `unanswered-isr-change`
    opening (whose held controller answers would fence the leader first)."""

    @classmethod
    def for_seed(
        cls,
        seed: int,
        size: str = "ci",
        bugs: frozenset[str] = frozenset(),
        opening: str | None = None,
    ) -> Scenario:
        """The seed's scenario; `opening` forces that opening (None: as the seed draws it)."""
        rng = random.Random(seed ^ 0x51A7)
        chaos = {"ci": 30.0, "nightly": 90.0, "smoke": 10.0}[size]
        flush = rng.random() < 0.2
        weights = dict(CI_WEIGHTS)
        if rng.random() < 0.1:
            weights = {"kill": 1.0}  # a gentle run now and then: only crashes
        elif rng.random() < 0.15:
            weights = dict.fromkeys(weights, 0.0) | {"resets": 1.0, "stall": 1.0}
        plan = FaultPlan(
            weights,
            every=rng.choice(((0.5, 2.0), (1.0, 4.0), (2.0, 8.0))),
            long_chance=rng.choice((0.0, 0.33, 0.5)),
            whole_cluster_power_cuts=flush,
            clients=("client",),
        )
        aim = random.Random(seed ^ 0x0FE1)
        drawn = aim.choice(OPENINGS) if aim.random() < OPENING_CHANCE else ""
        opening = drawn if opening is None else opening
        no_elr = aim.random() < 2 / 3  # sole-leader-restart's bug needs ELR off
        scenario = cls(
            seed=seed,
            chaos=chaos,
            partitions=rng.choice((1, 2, 3)),
            producers=rng.choice((1, 2, 3)),
            transactions=rng.random() < 0.7,
            readers=True,
            commits=rng.random() < 0.7,
            elr=rng.choice((0, 1, 1)),
            flush_every_message=flush,
            faults=plan,
            max_skew_ms=rng.choice((0, 2_000, 30_000)),
            max_drift=rng.choice((0.0, 0.001, 0.02)),
            disk_latency_ms=rng.choice((0.1, 2.0, 20.0)),
            produce_interval=rng.choice((0.01, 0.05, 0.2)),
            planted=bugs,
        )
        if not opening:
            return scenario
        return replace(
            scenario,
            chaos=max(chaos, OPENING_CHAOS),
            faults=replace(plan, opening=opening),
            elr=0 if opening == "sole-leader-restart" and no_elr else scenario.elr,
            session_timeout_ms=45_000 if opening == "unanswered-isr-change" else 6_000,
        )

    def describe(self) -> str:
        kinds = ",".join(k for k, w in sorted(self.faults.weights.items()) if w > 0)
        return (
            f"seed {self.seed}: {self.chaos:.0f}s of chaos, {self.partitions} partitions, "
            f"{self.producers} producers, transactions {'on' if self.transactions else 'off'}, "
            f"commits {'on' if self.commits else 'off'}, ELR {self.elr}, flush.messages="
            f"{'1' if self.flush_every_message else 'default'}, faults every "
            f"{self.faults.every[0]}-{self.faults.every[1]}s ({kinds}), skew up to "
            f"{self.max_skew_ms} ms, drift up to {self.max_drift}, disk latency up to "
            f"{self.disk_latency_ms} ms"
            + (f", opening {self.faults.opening}" if self.faults.opening else "")
            + (f", planted {sorted(self.planted)}" if self.planted else "")
        )


@dataclass
class Result:
    seed: int
    violations: list[Violation]
    summary: str
    trace_hash: str
    trace: list[str]
    virtual_seconds: float
    cpu_seconds: float
    faults: dict[str, int]
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations and not self.error


class Trace:
    """The run's events with their virtual time; a hash over them and every byte the network
    delivered says whether two runs were the same run. Broker log lines (INFO and up, with
    the node that wrote them) are kept in the trace, not in the hash: some carry real
    durations."""

    def __init__(self, keep: int, echo: bool) -> None:
        self.lines: deque[str] = deque(maxlen=keep)
        self.hash = hashlib.blake2b(digest_size=16)
        self.echo = echo

    def event(self, text: str) -> None:
        line = f"{_now():10.4f} {text}"
        self.hash.update(line.encode())
        self._keep(line)

    def log(self, text: str) -> None:
        self._keep(f"{_now():10.4f} {text}")

    def digest(self, data: bytes) -> None:
        self.hash.update(data)

    def _keep(self, line: str) -> None:
        self.lines.append(line)
        if self.echo:
            print(line, flush=True)


def _now() -> float:
    try:
        return trio.current_time()
    except RuntimeError:
        return 0.0


class _TraceHandler(logging.Handler):
    def __init__(self, trace: Trace) -> None:
        super().__init__(logging.INFO)
        self.trace = trace

    def emit(self, record: logging.LogRecord) -> None:
        current = runtime.current()
        who = current.name if isinstance(current, SimRuntime) else "sim"
        try:
            message = record.getMessage()
        except Exception:  # a broken log call must not end the run
            message = str(record.msg)
        self.trace.log(f"{who} {record.levelname} {record.name}: {message}")


@contextmanager
def _captured_logs(trace: Trace) -> Iterator[None]:
    logger = logging.getLogger("strom")
    handler = _TraceHandler(trace)
    previous = (logger.level, logger.propagate)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous[0])
        logger.propagate = previous[1]


class Simulation:
    def __init__(self, scenario: Scenario, trace: Trace) -> None:
        self.scenario = scenario
        self.trace = trace
        rng = random.Random(scenario.seed)
        self.rng = rng
        self.history = History(trace.event)
        self.net = SimNetwork(random.Random(rng.getrandbits(64)), trace.event, trace.digest)
        self.net.default_profile = LinkProfile()
        self.disk = SimDisk(lambda: EPOCH_MS + int(_now() * 1000))
        skews = [
            Skew(
                rng.randint(-scenario.max_skew_ms, scenario.max_skew_ms),
                rng.uniform(-scenario.max_drift, scenario.max_drift),
            )
            for _ in range(3)
        ]
        latency = scenario.disk_latency_ms / 1000

        def disk_latency(r: random.Random) -> float:
            return r.random() * latency if r.random() < 0.9 else r.random() * latency * 10

        self.cluster = SimCluster(
            nodes=3,
            root=ROOT,
            net=self.net,
            disk=self.disk,
            rng=random.Random(rng.getrandbits(64)),
            trace=trace.event,
            cluster_id=new_cluster_id(lambda: uuid.UUID(int=rng.getrandbits(128), version=4)),
            overrides=self._overrides(),
            features={"eligible.leader.replicas.version": scenario.elr},
            disk_latency=disk_latency,
            skews=skews,
        )
        # leader epochs seen: (topic, partition, leader epoch) -> (node, incarnation)
        self.partition_leaders: dict[tuple[str, int, int], tuple[int, int]] = {}
        self.raft_leaders: dict[int, int] = {}
        self.raft_committed: dict[int, tuple[int, int]] = {}
        self.raft_checked: dict[tuple[int, int], int] = {}
        self.hw_reported: set[tuple[str, int, int, int]] = set()
        self.epochs_reported: set[tuple[tuple[str, int, int], tuple[int, int]]] = set()
        self.nemesis: Nemesis | None = None

    def _overrides(self) -> dict[str, str]:
        flush = {"log.flush.interval.messages": "1"} if self.scenario.flush_every_message else {}
        return flush | {
            "broker.session.timeout.ms": str(self.scenario.session_timeout_ms),
            "broker.heartbeat.interval.ms": "1500",
            "replica.lag.time.max.ms": "10000",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.num.partitions": "2",
            "transaction.state.log.min.isr": "2",
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "false",
            "transaction.max.timeout.ms": "120000",
        }

    # --- the run ----------------------------------------------------------------------------

    async def run(self) -> None:
        self.cluster.format()
        async with trio.open_nursery() as nursery:
            self.cluster.bind(nursery)
            for node in self.cluster.nodes:
                self.cluster.start(node)
            nursery.start_soon(self._monitor)
            client = SimRuntime("client", self.net, random.Random(self.rng.getrandbits(64)))
            with runtime.running(client):
                await self._workload()
            nursery.cancel_scope.cancel()
        for node in self.cluster.nodes:
            self.cluster.kill(node)

    async def _workload(self) -> None:
        scenario, history = self.scenario, self.history
        view = clients.ClusterView("client", [n.bootstrap for n in self.cluster.nodes],
                                   random.Random(self.rng.getrandbits(64)))  # fmt: skip
        configs = {"min.insync.replicas": "2"}
        if scenario.flush_every_message:  # the internal topics too: the broker's default
            configs["flush.messages"] = "1"
        await clients.create_topic(view, TOPIC, scenario.partitions, 3, configs)
        while len([k for k in view.partitions if k[0] == TOPIC]) < scenario.partitions:
            await view.refresh_quietly([TOPIC])
            await trio.sleep(0.2)
        self.trace.event(f"topic {TOPIC} created with {scenario.partitions} partitions")
        start = trio.current_time()
        until = start + scenario.chaos
        self.nemesis = Nemesis(
            self.cluster, scenario.faults, random.Random(self.rng.getrandbits(64)),
            self.trace.event, self._isrs_full, self._raft_leader, self._reference_image, TOPIC,
        )  # fmt: skip
        interval_rng = random.Random(self.rng.getrandbits(64))

        def interval() -> float:
            return interval_rng.uniform(0, 2 * scenario.produce_interval)

        readers: list[clients.Reader] = []
        async with trio.open_nursery() as load:
            load.start_soon(self.nemesis.run, until)
            for i in range(scenario.producers):
                producer = clients.IdempotentProducer(
                    f"p{i}", view, TOPIC, scenario.partitions, history,
                    random.Random(self.rng.getrandbits(64)),
                )  # fmt: skip
                load.start_soon(producer.run, until, interval)
            if scenario.transactions:
                txn = clients.TransactionalProducer(
                    "t0", view, TOPIC, scenario.partitions, history,
                    random.Random(self.rng.getrandbits(64)), TXN_GROUP,
                )  # fmt: skip
                load.start_soon(txn.run, until, lambda: interval() * 4)
            if scenario.commits:
                committer = clients.OffsetCommitter(
                    "c0", view, TOPIC, scenario.partitions, GROUP, history,
                    random.Random(self.rng.getrandbits(64)),
                )  # fmt: skip
                load.start_soon(committer.run, until, interval)
            if scenario.readers:
                for committed in (False, True):
                    reader = clients.Reader(
                        "rc" if committed else "ru", view, TOPIC, scenario.partitions, history,
                        read_committed=committed,
                    )  # fmt: skip
                    readers.append(reader)
                    load.start_soon(reader.run, until)
        self.trace.event("load stopped; healing")
        await self._heal()
        await self._converge()
        await self._final_read(view)
        await view.close()

    # --- after the chaos ----------------------------------------------------------------------

    async def _heal(self) -> None:
        self.net.heal()
        self.net.stalled_until.clear()
        self.net.profiles.clear()
        self.disk.failing_fsync.clear()
        self.disk.full.clear()
        for node in self.cluster.nodes:
            await self.cluster.restart(node)

    def _images(self) -> list[tuple[SimNode, BrokerState]]:
        """The nodes up, with their broker state (once they have one)."""
        out = []
        for node in self.cluster.nodes:
            state = self._state(node.node_id)
            if state is not None:
                out.append((node, state))
        return out

    def _state(self, node_id: int) -> BrokerState | None:
        if node_id < 0:  # no leader
            return None
        node = self.cluster.node(node_id)
        return node.broker.state if node.broker is not None and node.up else None

    def _log(self, node_id: int, topic: str, partition: int) -> PartitionLog | None:
        state = self._state(node_id)
        return None if state is None else state.logs.get(topic, partition)

    def _converged(self) -> bool:
        """Every node serves, every partition of every topic has a leader and its full replica
        set in the ISR, and every replica's log ends where the leader's high watermark is."""
        live = self._images()
        if len(live) != len(self.cluster.nodes) or not all(n.serving for n, _ in live):
            return False
        states = [s for _, s in live]
        image = states[0].image
        if any(s.image.provenance.offset != image.provenance.offset for s in states):
            return False
        for topic in image.topics_by_name.values():
            for index, partition in topic.partitions.items():
                if partition.leader < 0 or set(partition.isr) != set(partition.replicas):
                    return False
                log = self._log(partition.leader, topic.name, index)
                if log is None:
                    return False
                hw = log.high_watermark
                if log.last_stable_offset != hw:
                    return False
                for replica in partition.replicas:
                    other = self._log(replica, topic.name, index)
                    if other is None or other.log_end_offset != hw:
                        return False
        return True

    async def _converge(self) -> None:
        began = trio.current_time()
        while not self._converged():
            if trio.current_time() - began > CONVERGE_WITHIN:
                self.history.violation(
                    "stuck", f"replicas did not converge within {CONVERGE_WITHIN:.0f}s of the heal"
                )
                self._report_unconverged()
                return
            await trio.sleep(0.5)
        self.trace.event(f"converged {trio.current_time() - began:.1f}s after the heal")

    def _report_unconverged(self) -> None:
        for node, state in self._images():
            image = state.image
            for topic in image.topics_by_name.values():
                for index, p in topic.partitions.items():
                    log = state.logs.get(topic.name, index)
                    where = "-" if log is None else f"leo {log.log_end_offset} hw {log.high_watermark} lso {log.last_stable_offset}"
                    self.trace.event(f"  {node.host} sees {topic.name}-{index} leader {p.leader} "
                                     f"isr {p.isr}: {where}")  # fmt: skip

    async def _final_read(self, view: clients.ClusterView) -> None:
        history = self.history
        await view.refresh_quietly()
        for partition in range(self.scenario.partitions):
            for committed in (False, True):
                records = await self._read_all(view, partition, committed)
                if records is None:
                    history.violation("stuck", f"the final read of partition {partition} failed")
                    continue
                target = history.final_committed if committed else history.final_records
                target[partition] = [(r.offset, r.value) for r in records]
        self._compare_replicas()
        for group in (GROUP, TXN_GROUP):
            offsets = await self._group_offsets(view, group)
            if offsets is not None:
                history.final_group_offsets[group] = offsets

    async def _read_all(
        self, view: clients.ClusterView, partition: int, committed: bool
    ) -> list[clients.Fetched] | None:
        out: list[clients.Fetched] = []
        offset = 0
        deadline = trio.current_time() + 60
        while trio.current_time() < deadline:
            got = await clients.fetch_once(view, TOPIC, partition, offset,
                                           read_committed=committed, max_wait_ms=0)  # fmt: skip
            if isinstance(got, int):
                await view.refresh_quietly([TOPIC])
                await trio.sleep(0.1)
                continue
            records, next_offset, hw = got
            out.extend(records)
            if next_offset >= hw:
                return out
            offset = next_offset
        return None

    async def _group_offsets(self, view: clients.ClusterView, group: str) -> dict[int, int] | None:
        body = OffsetFetchRequest(
            group_id=group,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(TOPIC, list(range(self.scenario.partitions)))],
            require_stable=True,
        )
        deadline = trio.current_time() + 60
        while trio.current_time() < deadline:
            coordinator = await clients.find_coordinator(view, group, 0, deadline)
            if coordinator is None:
                break
            try:
                answer = await view.to_node(coordinator, body, 7, OffsetFetchResponse)
            except clients.Unavailable:
                await trio.sleep(0.2)
                continue
            if answer.error_code != ErrorCode.NONE:
                await trio.sleep(0.2)
                continue
            return {
                p.partition_index: p.committed_offset
                for t in answer.topics
                for p in t.partitions
                if p.error_code == ErrorCode.NONE
            }
        self.history.violation("stuck", f"no final offsets of group {group}")
        return None

    def _compare_replicas(self) -> None:
        """Every replica's batches below the high watermark, byte for byte (every topic)."""
        live = self._images()
        if not live:
            return
        image = live[0][1].image
        for topic in sorted(image.topics_by_name.values(), key=lambda t: t.name):
            for index, partition in sorted(topic.partitions.items()):
                leader_log = self._log(partition.leader, topic.name, index)
                if leader_log is None:
                    continue
                hw = leader_log.high_watermark
                logs = {}
                for replica in partition.replicas:
                    log = self._log(replica, topic.name, index)
                    if log is not None:
                        logs[replica] = log
                start = max(log.log_start_offset for log in logs.values())
                batches = {r: _batches(log, start, hw) for r, log in logs.items()}
                first = partition.leader
                for replica, theirs in sorted(batches.items()):
                    if theirs != batches[first]:
                        self.history.replica_problems.append(
                            f"{topic.name}-{index}: node {replica} and leader {first} differ below "
                            f"the high watermark {hw}: {_first_difference(batches[first], theirs)}"
                        )
                if topic.name == TOPIC:
                    self._check_contiguous(index, batches[first], start, hw)

    def _check_contiguous(self, partition: int, batches: list[tuple[int, int, bytes]], start: int, hw: int) -> None:
        expected = start
        for base, next_offset, _data in batches:
            if base != expected:
                self.history.final_holes.append(
                    f"partition {partition}: a batch at {base} where {expected} was expected"
                )
                return
            expected = next_offset
        if batches and expected < hw:
            self.history.final_holes.append(f"partition {partition}: batches end at {expected} < hw {hw}")

    # --- live invariants ------------------------------------------------------------------------

    async def _monitor(self) -> None:
        while True:
            await trio.sleep(MONITOR_EVERY)
            self._check_live()

    def _check_live(self) -> None:
        for node in self.cluster.nodes:
            if not node.up or node.broker is None or node.broker.state is None:
                continue
            state = node.broker.state
            for (topic, partition), leadership in state.replication.leaders.items():
                key = (topic, partition, leadership.leader_epoch)
                who = (node.node_id, node.incarnation)
                first = self.partition_leaders.setdefault(key, who)
                if first != who and (key, who) not in self.epochs_reported:
                    self.epochs_reported.add((key, who))
                    self.history.violation(
                        "invariant",
                        f"{topic}-{partition} leader epoch {leadership.leader_epoch} led by node "
                        f"{first[0]} (incarnation {first[1]}) and node {who[0]} (incarnation {who[1]})",
                    )
            raft = state.raft
            core = raft.core if raft is not None else None
            if core is None:
                continue
            if core.role == Role.LEADER:
                leader = self.raft_leaders.setdefault(core.epoch, node.node_id)
                if leader != node.node_id:
                    self.history.violation(
                        "invariant", f"Raft epoch {core.epoch} has two leaders: {leader} and {node.node_id}"
                    )
            key2 = (node.node_id, node.incarnation)
            checked = max(self.raft_checked.get(key2, 0), core.log.start_offset)
            for offset in range(checked, min(core.high_watermark, core.log.end_offset)):
                entry = core.log.entry(offset)
                if entry is None:
                    continue
                digest = (entry.epoch, hash(entry.data))
                known = self.raft_committed.setdefault(offset, digest)
                if known != digest:
                    self.history.violation(
                        "invariant",
                        f"Raft offset {offset}: node {node.node_id} holds epoch {entry.epoch} "
                        f"below its high watermark, committed as epoch {known[0]}",
                    )
            self.raft_checked[key2] = max(checked, min(core.high_watermark, core.log.end_offset))
        self._check_high_watermarks()

    def _isrs_full(self) -> bool:
        """Whether a power cut may come now (the jepsen nemesis's guard, `cut_blockers`): every
        node's current process serves, is registered and unfenced as every node's metadata
        says, and every node's metadata shows every partition with a leader and its full
        replica set in the ISR. One node's image alone is not enough: a broker restarted after
        an unclean shutdown still counts in the ISRs until its new registration is committed
        (seed 2766 cut the power of the only clean replica then, by Kafka's rules a loss)."""
        live = self._images()
        if len(live) != len(self.cluster.nodes) or not all(n.serving for n, _ in live):
            return False
        epochs = {node.node_id: state.controller.broker_epoch for node, state in live}
        for _, state in live:
            image = state.image
            for node_id, epoch in epochs.items():
                registration = image.broker(node_id)
                if registration is None or registration.epoch != epoch or not registration.active:
                    return False
            for topic in image.topics_by_name.values():
                for p in topic.partitions.values():
                    if p.leader < 0 or set(p.isr) != set(p.replicas):
                        return False
        return True

    def _reference_image(self) -> MetadataImage | None:
        """The newest committed metadata among the nodes up (the active controller's, mostly:
        it adopts a command before answering it)."""
        live = self._images()
        if not live:
            return None
        return max((state.image for _, state in live), key=lambda image: image.provenance.offset)

    def _check_high_watermarks(self) -> None:
        """A partition leader's high watermark never passes the log end of a replica the
        committed metadata counts in its ISR: that replica may be elected, and would lose what
        is below it. Checked for replicas whose current process is registered (a restarted one
        has its log back from the disk, maybe shorter; its new registration takes it out of
        the ISRs first) and leaders in the epoch the metadata names."""
        image = self._reference_image()
        if image is None:
            return
        states = {node.node_id: state for node, state in self._images()}

        def registered(node_id: int) -> BrokerState | None:
            state = states.get(node_id)
            registration = image.broker(node_id)
            if state is None or registration is None or not registration.active:
                return None
            return state if state.controller.broker_epoch == registration.epoch else None

        for topic in image.topics_by_name.values():
            for index, p in topic.partitions.items():
                leader = registered(p.leader)
                if leader is None:
                    continue
                leadership = leader.replication.leaders.get((topic.name, index))
                if leadership is None or leadership.leader_epoch != p.leader_epoch:
                    continue
                hw = leadership.replica_set.high_watermark
                for replica in p.isr:
                    follower = registered(replica) if replica != p.leader else None
                    log = None if follower is None else follower.logs.get(topic.name, index)
                    if log is None or log.log_end_offset >= hw:
                        continue
                    key = (topic.name, index, p.leader_epoch, replica)
                    if key in self.hw_reported:
                        continue
                    self.hw_reported.add(key)
                    self.history.violation(
                        "invariant",
                        f"{topic.name}-{index}: leader {p.leader}'s high watermark {hw} (leader "
                        f"epoch {p.leader_epoch}) passed node {replica}'s log end "
                        f"{log.log_end_offset}, while the metadata (offset "
                        f"{image.provenance.offset}) counts it in the ISR {list(p.isr)}",
                    )

    def _raft_leader(self) -> int | None:
        for node, state in self._images():
            raft = state.raft
            if raft is not None and raft.core is not None and raft.core.role == Role.LEADER:
                return node.node_id
        return None


def _batches(log: PartitionLog, start: int, end: int) -> list[tuple[int, int, bytes]]:
    """(base offset, next offset, bytes) of every batch of `log` in [start, end)."""
    out: list[tuple[int, int, bytes]] = []
    offset = start
    while offset < end:
        result = log.read(offset, 1 << 20, max_offset=end)
        data = result.read_bytes()
        if not data:
            break
        for header, view in iter_batches(data, allow_partial=False):
            if header.next_offset <= offset:
                continue
            if header.base_offset >= end:
                return out
            out.append((header.base_offset, header.next_offset, bytes(view)))
            offset = header.next_offset
    return out


def _first_difference(a: list[tuple[int, int, bytes]], b: list[tuple[int, int, bytes]]) -> str:
    for x, y in zip(a, b, strict=False):
        if x != y:
            return f"batch at {x[0]}-{x[1]} vs {y[0]}-{y[1]}"
    return f"{len(a)} batches vs {len(b)}"


# --- running seeds --------------------------------------------------------------------------------


def run_seed(
    seed: int,
    *,
    size: str = "ci",
    bugs: frozenset[str] = frozenset(),
    echo: bool = False,
    keep: int = 20_000,
    opening: str | None = None,
    end_at_violation: bool = False,
) -> Result:
    """Run one seed to the end and judge it (`opening`: force that opening, see
    `Scenario.for_seed`; `end_at_violation`: end the run at its first violation, as a search
    for a failing seed wants: the rest of a failing run costs CPU and proves nothing more)."""
    scenario = Scenario.for_seed(seed, size, bugs, opening)
    trace = Trace(keep, echo)
    trace.event(scenario.describe())
    simulation = Simulation(scenario, trace)
    previous_disk = disk.use(simulation.disk)
    previous_bugs = planted.plant(bugs)
    error = ""
    cpu = time.process_time()
    clock = trio.testing.MockClock(autojump_threshold=0)
    try:
        with deterministic_scheduling(seed), _captured_logs(trace):

            async def main() -> None:
                with trio.move_on_after(RUN_LIMIT) as limit:
                    guard.scope = limit
                    if end_at_violation:
                        simulation.history.on_violation = limit.cancel
                    await simulation.run()
                simulation.history.on_violation = None
                if guard.tripped:
                    simulation.history.violation("stuck", guard.tripped)
                elif limit.cancelled_caught and not (end_at_violation and simulation.history.live):
                    simulation.history.violation("stuck", f"the run did not end within {RUN_LIMIT:.0f}s")

            guard = _SpinGuard(clock, SPIN_LIMIT)
            trio.run(main, clock=clock, instruments=[guard])
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        error = f"{type(exc).__name__}: {exc}"
        trace.log(f"simulation error: {_describe(exc)}")
    finally:
        disk.use(previous_disk)
        planted.plant(previous_bugs)
    cpu = time.process_time() - cpu
    if end_at_violation and simulation.history.live:
        # ended there: no final read to judge the rest against
        violations = list(simulation.history.live)
    else:
        violations = simulation.history.check()
    summary = simulation.history.summary(violations)
    if error:
        summary = f"ERROR {error}; {summary}"
    trace.event(f"result: {summary}")
    faults = dict(simulation.nemesis.counts) if simulation.nemesis is not None else {}
    return Result(
        seed, violations, summary, trace.hash.hexdigest(), list(trace.lines),
        clock.current_time(), cpu, faults, error,
    )  # fmt: skip


class _SpinGuard(trio.abc.Instrument):
    """Ends a run whose tasks keep running while the virtual clock stands still (a busy loop,
    which on a real machine burns a core), naming the tasks that ran most."""

    def __init__(self, clock: trio.testing.MockClock, limit: int) -> None:
        self.clock = clock
        self.limit = limit
        self.at = -1.0
        self.steps = 0
        self.busiest: Counter[str] = Counter()
        self.scope: trio.CancelScope | None = None
        self.tripped = ""

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        now = self.clock.current_time()
        if now != self.at:
            self.at, self.steps = now, 0
            self.busiest.clear()
            return
        self.steps += 1
        if self.steps > self.limit - 1000:
            self.busiest[task.name] += 1
        if self.steps == self.limit and self.scope is not None and not self.tripped:
            tasks = ", ".join(f"{name} x{n}" for name, n in self.busiest.most_common(4))
            self.tripped = (
                f"{self.limit} task steps at virtual time {now:.4f} without the clock moving "
                f"(a busy loop); the last 1000 steps ran {tasks}"
            )
            self.scope.cancel()


def _describe(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(exc))
