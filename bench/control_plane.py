"""The control plane at scale: a real 3-voter controller quorum against many simulated brokers.

    python bench/control_plane.py --quick                       # 3 and 30 brokers, 10k partitions
    python bench/control_plane.py                               # the grid below (hours on 2 cores)
    python bench/control_plane.py --brokers 300 --partitions 1000000

The quorum is three controller-only `strom serve` processes (`ClusterProcess(controllers=3)`,
Kafka's default Raft timeouts). The brokers are trio tasks in this process, each speaking the
real RPCs to the controller listeners as a broker-only node does, without hosting any data:

- BrokerRegistration to the active controller (its listener, rack-less, the metadata.version
  range a Strom broker supports), then BrokerHeartbeat every `broker.heartbeat.interval.ms`
  (2 s) with the metadata offset it has fetched; it is unfenced once caught up;
- the metadata log as a Raft observer: Fetch v17 long-polls (500 ms) to the quorum leader from
  its fetch offset and last fetched epoch, following leader changes, diverging epochs and, when
  the leader says its offset is below the log start, FetchSnapshot in 1 MiB chunks. It reads
  only batch headers (offsets and epochs), not records: what a broker does with the records
  (its image) is measured separately, by a real broker's start-up below.

Each run (one broker count, one partition count) on a fresh quorum measures:

- registration: from starting N brokers to all of them unfenced;
- creation: topics of 1,000 partitions, replication factor 3 (fewer with fewer brokers),
  spread by the controller over the brokers, ten to a CreateTopics request (Kafka's limit of
  10,000 partitions a request), back to back until the partition count is reached: the rate, and every controller's resident memory before and after (memory per
  partition = the growth over the partitions);
- propagation: 20 small changes afterwards (a 1-partition topic each): from the CreateTopics
  answer to the moment each broker's fetches report a high watermark covering it; p50, p99 and
  max over brokers and changes; the same, sampled during creation, under load;
- snapshots: the controllers write one every 20 MiB of metadata (`metadata.log.max.record.bytes.
  between.snapshots`); their log lines give each snapshot's encoding and writing time and size;
- failover: kill -9 of the active controller; until DescribeQuorum on the others names a new
  leader, and until every broker's heartbeat is answered again (the control plane usable);
- restart of the killed controller: until it is back in the quorum and caught up (its log
  fetched and, if it had one, its snapshot loaded);
- a broker's start-up against the image: a real broker-only `strom serve` (no partitions of its
  own) started after all of this: its "started" line, the snapshot it fetched loaded (and how
  long the load took), unfenced and serving, and its Metadata listing every topic (it fetched
  and loaded the whole image): polled by a Metadata request for the last topic created (topics
  are applied in log order, so the image then holds every one), then one Metadata request for
  all topics, timed from sending it to its answer decoded here (a million partitions are
  42 MB; about 4 s of that is this process decoding them), which must list every topic.

Output: a markdown table on stdout, JSON in `bench/results/control_plane.json`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/control_plane.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import machine_info, rss_bytes  # noqa: E402
from strom.broker.drivers.peer import PeerConnection, PeerUnavailable  # noqa: E402
from strom.broker.testing.cluster import ClusterProcess  # noqa: E402
from strom.config.quorum import Address  # noqa: E402
from strom.coordinator.controller.placement import MAX_PARTITIONS_PER_REQUEST  # noqa: E402
from strom.coordinator.controller.state_machine import (  # noqa: E402
    LATEST_METADATA_VERSION,
    MIN_METADATA_VERSION,
    SUPPORTED_FEATURES,
)
from strom.coordinator.metadata.image import METADATA_VERSION  # noqa: E402
from strom.coordinator.raft.wire import METADATA_TOPIC, METADATA_TOPIC_ID  # noqa: E402
from strom.wire.errors import ErrorCode  # noqa: E402
from strom.wire.message import Message  # noqa: E402
from strom.wire.messages.broker_heartbeat import (  # noqa: E402
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
)
from strom.wire.messages.broker_registration import (  # noqa: E402
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from strom.wire.messages.create_topics import (  # noqa: E402
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from strom.wire.messages.describe_quorum import (  # noqa: E402
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)
from strom.wire.messages.fetch import FetchRequest, FetchResponse  # noqa: E402
from strom.wire.messages.fetch_snapshot import (  # noqa: E402
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from strom.wire.records import LOG_OVERHEAD, BatchHeader, peek_length  # noqa: E402

RESULTS = _ROOT / "bench" / "results"
PER_TOPIC = 1000
HEARTBEAT_S = 2.0
FETCH_WAIT_MS = 500
SNAPSHOT_CHUNK = 1 << 20
REGISTER_VERSION, HEARTBEAT_VERSION = 4, 1
FETCH_VERSION, SNAPSHOT_VERSION, CREATE_VERSION, QUORUM_VERSION = 17, 1, 7, 2
RPC_TIMEOUT_S = 30.0
RETRY_BACKOFF_S, RETRY_BACKOFF_MAX_S = 0.02, 1.0
START_TIMEOUT_S = 600.0
FULL_GRID = [(3, 10_000), (30, 10_000), (100, 10_000), (300, 10_000), (300, 100_000),
             (300, 1_000_000)]  # fmt: skip
QUICK_GRID = [(3, 10_000), (30, 10_000)]


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


# --- the simulated brokers ---------------------------------------------------------------------


@dataclass
class Probe:
    """One metadata change: when it was answered, the log offset that covers it, and when each
    broker learnt that offset was committed."""

    offset: int
    answered: float
    seen: dict[int, float] = field(default_factory=dict)
    everyone: trio.Event = field(default_factory=trio.Event)


class Fleet:
    """The simulated brokers, and the probes of changes whose propagation is measured."""

    def __init__(self, cluster_id: str, voters: dict[int, Address]) -> None:
        self.cluster_id = cluster_id
        self.voters = voters
        self.brokers: list[SimBroker] = []
        self.probes: list[Probe] = []
        self.leader: int | None = None
        """The quorum leader as the latest answers say."""
        self.epochs: set[int] = set()
        """Raft epochs seen by DescribeQuorum (more than one: leader elections)."""

    def committed(self, broker: SimBroker, offset: int) -> None:
        now = time.perf_counter()
        if offset > broker.history[-1][1]:
            broker.history.append((now, offset))
        for probe in self.probes:
            if broker.broker_id not in probe.seen and offset >= probe.offset:
                probe.seen[broker.broker_id] = now
                if len(probe.seen) == len(self.brokers):
                    probe.everyone.set()

    async def probe(self, offset: int, answered: float) -> Probe:
        """Wait until every broker learnt that `offset` is committed (the caller bounds it)."""
        probe = Probe(offset, answered)
        for broker in self.brokers:
            if broker.high_watermark >= offset:  # learnt already: when?
                probe.seen[broker.broker_id] = next(
                    t for t, hw in broker.history if hw >= offset
                )
        if len(probe.seen) == len(self.brokers):
            return probe
        self.probes.append(probe)
        try:
            await probe.everyone.wait()
        finally:
            self.probes.remove(probe)
        return probe


class SimBroker:
    """One broker without data: registration, heartbeats and the metadata log's fetches."""

    def __init__(self, fleet: Fleet, broker_id: int) -> None:
        self.fleet = fleet
        self.broker_id = broker_id
        self.epoch = -1
        self.fenced = True
        self.unfenced = trio.Event()
        self.fetch_offset = 0
        self.last_epoch = -1
        self.high_watermark = 0
        self.history: collections.deque[tuple[float, int]] = collections.deque(
            [(0.0, 0)], maxlen=10_000
        )
        """(when, high watermark) as it moved: when a change reached this broker."""
        self.leader_epoch = -1
        self.heartbeat_ok = time.perf_counter()
        """When a heartbeat was last answered without error."""
        self._heartbeat = trio.Event()
        self._fetch: dict[int, PeerConnection] = {}
        self._control: dict[int, PeerConnection] = {}
        self._correlation = 0

    def _conn(self, pool: dict[int, PeerConnection], node: int) -> PeerConnection:
        conn = pool.get(node)
        if conn is None:
            conn = pool[node] = PeerConnection(self.fleet.voters[node], f"sim-broker-{self.broker_id}")
        return conn

    async def _call(
        self, pool: dict[int, PeerConnection], node: int, body: Message, version: int
    ) -> Message:
        self._correlation += 1
        return await self._conn(pool, node).request(body, version, self._correlation, RPC_TIMEOUT_S)

    async def _to_active(self, body: Message, version: int) -> Message:
        """Send to the active controller, finding it through NOT_CONTROLLER answers; between
        attempts the backoff of a broker's controller channel (controller.quorum.retry.
        backoff.ms, 20 ms, doubling up to retry.backoff.max.ms, 1 s), so that 300 brokers
        asking during a failover do not flood the new controller."""
        nodes = sorted(self.fleet.voters)
        backoff = RETRY_BACKOFF_S
        while True:
            node = self.fleet.leader if self.fleet.leader is not None else random.choice(nodes)
            try:
                response = await self._call(self._control, node, body, version)
            except PeerUnavailable:
                self.fleet.leader = None
            else:
                if getattr(response, "error_code", 0) != ErrorCode.NOT_CONTROLLER:
                    return response
                if self.fleet.leader == node:
                    self.fleet.leader = None
            await trio.sleep(backoff * (0.8 + 0.4 * random.random()))
            backoff = min(2 * backoff, RETRY_BACKOFF_MAX_S)

    async def heartbeat_answered(self, since: float) -> None:
        """Until a heartbeat sent after `since` is answered without error."""
        while self.heartbeat_ok < since:
            await self._heartbeat.wait()

    async def run(self) -> None:
        await self._register()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeats)
            nursery.start_soon(self._fetches)

    async def _register(self) -> None:
        request = BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=self.fleet.cluster_id,
            incarnation_id=uuid.uuid4(),
            listeners=[
                BrokerRegistrationRequest.Listener(
                    "PLAINTEXT", "127.0.0.1", 20_000 + self.broker_id, 0
                )
            ],
            features=[
                BrokerRegistrationRequest.Feature(
                    METADATA_VERSION, MIN_METADATA_VERSION, LATEST_METADATA_VERSION
                ),
                *(
                    BrokerRegistrationRequest.Feature(name, low, high)
                    for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
                ),
            ],
            log_dirs=[uuid.uuid4()],
        )
        while True:
            response = await self._to_active(request, REGISTER_VERSION)
            assert isinstance(response, BrokerRegistrationResponse)
            if response.error_code == ErrorCode.NONE:
                self.epoch = response.broker_epoch
                return
            await trio.sleep(0.1)

    async def _heartbeats(self) -> None:
        await trio.sleep(random.random() * HEARTBEAT_S)  # spread them as real brokers' are
        while True:
            request = BrokerHeartbeatRequest(
                broker_id=self.broker_id,
                broker_epoch=self.epoch,
                current_metadata_offset=self.high_watermark - 1,
            )
            response = await self._to_active(request, HEARTBEAT_VERSION)
            assert isinstance(response, BrokerHeartbeatResponse)
            if response.error_code == ErrorCode.NONE:
                self.heartbeat_ok = time.perf_counter()
                self._heartbeat.set()
                self._heartbeat = trio.Event()
                self.fenced = response.is_fenced
                if not self.fenced:
                    self.unfenced.set()
            await trio.sleep(HEARTBEAT_S if not self.fenced else 0.2)

    async def _fetches(self) -> None:
        nodes = sorted(self.fleet.voters)
        while True:
            node = self.fleet.leader if self.fleet.leader is not None else random.choice(nodes)
            request = FetchRequest(
                cluster_id=self.fleet.cluster_id,
                replica_state=FetchRequest.ReplicaState(self.broker_id, self.epoch),
                max_wait_ms=FETCH_WAIT_MS,
                min_bytes=1,
                max_bytes=8 << 20,
                topics=[FetchRequest.FetchTopic(METADATA_TOPIC, METADATA_TOPIC_ID, [
                    FetchRequest.FetchPartition(
                        partition=0, current_leader_epoch=self.leader_epoch,
                        fetch_offset=self.fetch_offset, last_fetched_epoch=self.last_epoch,
                        partition_max_bytes=8 << 20,
                    )
                ])],
            )  # fmt: skip
            try:
                response = await self._call(self._fetch, node, request, FETCH_VERSION)
            except PeerUnavailable:
                if self.fleet.leader == node:
                    self.fleet.leader = None
                await trio.sleep(0.05)
                continue
            assert isinstance(response, FetchResponse)
            if response.error_code or not response.responses:
                await trio.sleep(0.05)
                continue
            part = response.responses[0].partitions[0]
            leader = part.current_leader
            if leader.leader_id >= 0:
                self.fleet.leader = leader.leader_id
                self.leader_epoch = leader.leader_epoch
            if part.error_code != ErrorCode.NONE:
                if leader.leader_id < 0:
                    self.fleet.leader = None
                await trio.sleep(0.05)
                continue
            if part.snapshot_id.end_offset >= 0:
                await self._snapshot(node, part.snapshot_id.end_offset, part.snapshot_id.epoch)
                continue
            if part.diverging_epoch.end_offset >= 0:
                self.fetch_offset = part.diverging_epoch.end_offset
                self.last_epoch = part.diverging_epoch.epoch
                continue
            self._took(part.records)
            self.high_watermark = min(part.high_watermark, self.fetch_offset)
            self.fleet.committed(self, self.high_watermark)

    def _took(self, records: object) -> None:
        """Advance past whole batches (headers only)."""
        if not isinstance(records, bytes | bytearray | memoryview) or not records:
            return
        view = memoryview(records)
        pos = 0
        while len(view) - pos >= LOG_OVERHEAD + 4:
            size = peek_length(view, pos) + LOG_OVERHEAD
            if size > len(view) - pos:
                break
            header = BatchHeader.parse(view[pos : pos + size])
            self.fetch_offset = header.next_offset
            self.last_epoch = header.partition_leader_epoch
            pos += size

    async def _snapshot(self, node: int, end_offset: int, epoch: int) -> None:
        position = 0
        while True:
            request = FetchSnapshotRequest(
                cluster_id=self.fleet.cluster_id,
                replica_id=self.broker_id,
                max_bytes=SNAPSHOT_CHUNK,
                topics=[FetchSnapshotRequest.TopicSnapshot(METADATA_TOPIC, [
                    FetchSnapshotRequest.PartitionSnapshot(
                        partition=0, current_leader_epoch=self.leader_epoch,
                        snapshot_id=FetchSnapshotRequest.SnapshotId(end_offset, epoch),
                        position=position,
                    )
                ])],
            )  # fmt: skip
            try:
                response = await self._call(self._fetch, node, request, SNAPSHOT_VERSION)
            except PeerUnavailable:
                return
            assert isinstance(response, FetchSnapshotResponse)
            if response.error_code or not response.topics:
                return
            part = response.topics[0].partitions[0]
            if part.error_code != ErrorCode.NONE:
                return
            position += len(part.unaligned_records or b"")
            if position >= part.size:
                self.fetch_offset, self.last_epoch = end_offset, epoch
                return


# --- the quorum --------------------------------------------------------------------------------


async def describe_quorum(
    fleet: Fleet, nodes: list[int]
) -> DescribeQuorumResponse.PartitionData | None:
    """The quorum as the first of `nodes` that answers says (only the leader answers)."""
    for node in nodes:
        conn = PeerConnection(fleet.voters[node], "control-plane-bench")
        try:
            request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
                METADATA_TOPIC, [DescribeQuorumRequest.PartitionData(0)])])  # fmt: skip
            response = await conn.request(request, QUORUM_VERSION, 1, 5.0)
        except PeerUnavailable:
            continue
        finally:
            await conn.aclose()
        assert isinstance(response, DescribeQuorumResponse)
        if response.error_code == ErrorCode.NONE and response.topics:
            part = response.topics[0].partitions[0]
            if part.error_code == ErrorCode.NONE and part.leader_id >= 0:
                return part
    return None


async def create_topics(fleet: Fleet, admin: SimBroker, names: list[str], partitions: int,
                        replication: int) -> float:  # fmt: skip
    """CreateTopics back to back, as many topics per request as Kafka's limit of
    MAX_PARTITIONS_PER_REQUEST partitions allows (one controller command, one commit, each);
    returns when the last was answered."""
    per_request = max(1, MAX_PARTITIONS_PER_REQUEST // max(1, partitions))
    for i in range(0, len(names), per_request):
        chunk = names[i : i + per_request]
        request = CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                       replication_factor=replication)
                    for name in chunk],
            timeout_ms=120_000,
        )  # fmt: skip
        while True:
            response = await admin._to_active(request, CREATE_VERSION)
            assert isinstance(response, CreateTopicsResponse)
            codes = [t.error_code for t in response.topics]
            if ErrorCode.NOT_CONTROLLER not in codes:
                break
            fleet.leader = None  # the leader changed meanwhile: find the new one, again
            await trio.sleep(0.05)
        failed = {
            t.name: ErrorCode(t.error_code).name
            for t in response.topics
            if t.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
        }  # TOPIC_ALREADY_EXISTS: a retry of one that had committed
        if failed:
            raise RuntimeError(f"CreateTopics: {failed}")
    return time.perf_counter()


async def committed_offset(fleet: Fleet) -> int:
    """The quorum's high watermark (waiting out an election)."""
    with trio.move_on_after(60):
        while True:
            found = await describe_quorum(fleet, sorted(fleet.voters))
            if found is not None:
                fleet.epochs.add(found.leader_epoch)
                return found.high_watermark
            await trio.sleep(0.1)
    raise RuntimeError("no quorum leader for 60 s")


def controller_rss(cluster: ClusterProcess) -> dict[int, int]:
    return {n.node_id: rss_bytes(n.pid) for n in cluster.controllers if n.alive}


def snapshot_lines(cluster: ClusterProcess) -> list[dict[str, Any]]:
    out = []
    for node in cluster.controllers:
        for line in node.output:
            if "metadata snapshot" in line:
                out.append({"node": node.node_id, "line": line.split("msg=", 1)[-1][:300]})
    return out


# --- one run -----------------------------------------------------------------------------------


@dataclass
class RunResult:
    brokers: int
    partitions: int
    figures: dict[str, Any] = field(default_factory=dict)


async def _run(cluster: ClusterProcess, result: RunResult, log: Callable[[str], None],
               root: Path) -> None:  # fmt: skip
    """Fill `result.figures` stage by stage (a failing stage leaves the earlier ones)."""
    n_brokers, n_partitions = result.brokers, result.partitions
    fig = result.figures
    voters = {n.node_id: Address("127.0.0.1", n.port("CONTROLLER")) for n in cluster.controllers}
    fleet = Fleet(cluster.cluster_id, voters)
    first_id = max(voters) + 1
    fleet.brokers = [SimBroker(fleet, first_id + i) for i in range(n_brokers)]
    admin = SimBroker(fleet, 0)  # its connections only: never registered
    rss_before = controller_rss(cluster)
    async with trio.open_nursery() as nursery:
        started = time.perf_counter()
        for broker in fleet.brokers:
            nursery.start_soon(broker.run)
        with trio.fail_after(300):
            for broker in fleet.brokers:
                await broker.unfenced.wait()
        fig["register_all_s"] = round(time.perf_counter() - started, 3)
        log(f"{n_brokers} brokers unfenced in {fig['register_all_s']} s")

        # creation, with propagation sampled under load
        replication = min(3, n_brokers)
        topics = max(1, n_partitions // PER_TOPIC)
        per_topic = min(PER_TOPIC, n_partitions)
        began = time.perf_counter()
        loaded: list[float] = []
        step = max(1, topics // 10)
        for i in range(0, topics, step):
            names = [f"bench-{j}" for j in range(i, min(topics, i + step))]
            answered = await create_topics(fleet, admin, names, per_topic, replication)
            with trio.fail_after(300):
                probe = await fleet.probe(await committed_offset(fleet), answered)
            loaded += [t - probe.answered for t in probe.seen.values()]
            done = min(topics, i + step) * per_topic
            log(f"  {done:,} partitions in {time.perf_counter() - began:.1f} s")
        created = time.perf_counter() - began
        fig["create_s"] = round(created, 2)
        fig["elections_during_creation"] = len(fleet.epochs) - 1
        fig["create_partitions_per_s"] = round(topics * per_topic / created)
        fig["propagation_under_creation_ms"] = _ms(loaded)
        await trio.sleep(3)  # let snapshots and publishing settle
        rss_after = controller_rss(cluster)
        fig["controller_rss_mb"] = {k: round(v / 1e6, 1) for k, v in rss_after.items()}
        growth = [rss_after[k] - rss_before.get(k, 0) for k in rss_after]
        fig["image_bytes_per_partition"] = round(statistics.median(growth) / (topics * per_topic))

        # propagation of small changes at steady state
        samples: list[float] = []
        for i in range(20):
            answered = await create_topics(fleet, admin, [f"probe-{i}"], 1, replication)
            with trio.fail_after(120):
                probe = await fleet.probe(await committed_offset(fleet), answered)
            samples += [t - probe.answered for t in probe.seen.values()]
        fig["propagation_ms"] = _ms(samples)
        log(f"  propagation p99 {fig['propagation_ms']['p99']} ms")

        # failover: kill -9 of the active controller
        found = await describe_quorum(fleet, sorted(voters))
        assert found is not None
        old_leader = found.leader_id
        killed_at = time.perf_counter()
        cluster.kill(old_leader)
        others = [v for v in sorted(voters) if v != old_leader]
        with trio.fail_after(60):
            while True:
                asked_at = time.perf_counter()
                found = await describe_quorum(fleet, others)
                if time.perf_counter() - asked_at > 1:  # a voter slow to answer: when, who
                    log(f"  failover: DescribeQuorum took {time.perf_counter() - asked_at:.2f} s "
                        f"at {asked_at - killed_at:.2f} s after the kill; leader: "
                        f"{found.leader_id if found else None}")  # fmt: skip
                if found is not None and found.leader_id != old_leader:
                    break
                await trio.sleep(0.02)
        fig["failover_new_leader_s"] = round(time.perf_counter() - killed_at, 3)
        with trio.fail_after(60):
            for broker in fleet.brokers:
                await broker.heartbeat_answered(killed_at)
        fig["failover_heartbeats_answered_s"] = round(time.perf_counter() - killed_at, 3)
        fenced = sum(1 for b in fleet.brokers if b.fenced)
        fig["brokers_fenced_after_failover"] = fenced
        if fig["failover_new_leader_s"] > SLOW_FAILOVER_S:  # keep the evidence before it scrolls
            keep = RESULTS / "logs"
            write_controller_logs(cluster, keep, f"failover-b{len(fleet.brokers)}-{int(time.time())}")
            log(f"  failover slower than {SLOW_FAILOVER_S} s: the controllers' logs are in {keep}")
        log(f"  failover: leader in {fig['failover_new_leader_s']} s, every broker's heartbeat "
            f"answered in {fig['failover_heartbeats_answered_s']} s, {fenced} fenced")  # fmt: skip

        # the killed controller comes back: its snapshot and log loaded, caught up
        node = cluster.node(old_leader)
        had_snapshot = any("metadata snapshot" in line for line in node.output)
        restarted = time.perf_counter()
        await trio.to_thread.run_sync(partial(node.restart, timeout=START_TIMEOUT_S))
        target = await committed_offset(fleet)
        with trio.fail_after(300):
            while True:
                quorum = await describe_quorum(fleet, sorted(voters))
                ends = {v.replica_id: v.log_end_offset for v in quorum.current_voters} if quorum else {}
                if ends.get(old_leader, -1) >= target:
                    break
                await trio.sleep(0.05)
        snapshot_loaded = partial(_since_start, node.output, "loaded metadata snapshot")
        with trio.fail_after(300):  # its snapshot loads while it fetches the log
            while had_snapshot and not snapshot_loaded():  # noqa: ASYNC110 (another process's output)
                await trio.sleep(0.05)
        fig["controller_restart_caught_up_s"] = round(time.perf_counter() - restarted, 3)
        log(f"  killed controller back and caught up in {fig['controller_restart_caught_up_s']} s")

        # a real broker starting against the image
        fig["broker_startup"] = await trio.to_thread.run_sync(
            _real_broker_startup, cluster, root, topics + 20, "probe-19"
        )
        log(f"  a real broker: {fig['broker_startup']}")
        nursery.cancel_scope.cancel()


def _since_start(output: Iterable[str], text: str) -> bool:
    """Whether a node's output since its last start has a line containing `text`."""
    lines = list(output)
    starts = [i for i, line in enumerate(lines) if line.startswith("--- node ")]
    return any(text in line for line in lines[starts[-1] if starts else 0 :])


def _ms(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "p50": round(percentile(ms, 50), 1), "p99": round(percentile(ms, 99), 1),
            "max": round(max(ms), 1) if ms else float("nan")}  # fmt: skip


def _real_broker_startup(
    cluster: ClusterProcess, root: Path, topics: int, last_topic: str
) -> dict[str, float]:
    """Start a broker-only `strom serve` (node id 999) against the quorum: until its "started"
    line, until its Metadata knows `last_topic` (the last created: the image holds every topic),
    and how long a Metadata answer for all topics then takes (it must list `topics`).

    Polling with a Metadata request for all topics would measure the poll: at a million
    partitions one such answer takes seconds to build, encode and decode, so the figure would
    be whenever the first complete answer finished, up to a whole answer's time late."""
    from bench.harness import metadata_once
    from strom.broker.testing.embedded import child_environment

    data = root / "real-broker"
    data.mkdir()
    overrides = {
        "process.roles": "broker", "node.id": "999",
        "controller.quorum.voters": cluster.voters, "controller.listener.names": "CONTROLLER",
        "listeners": "PLAINTEXT://127.0.0.1:0", "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data / "data"), "metadata.log.dir": str(data / "metadata"),
    }  # fmt: skip
    config = [arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")]
    strom = [sys.executable, "-m", "strom"]
    subprocess.run([*strom, "format", "--cluster-id", cluster.cluster_id, *config], check=True,
                   capture_output=True, env=child_environment(), timeout=120)  # fmt: skip
    args = [*strom, "serve", *config]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=child_environment())  # fmt: skip
    out: dict[str, float] = {}
    said: list[str] = []
    started = threading.Event()
    port: list[int] = []

    def read_output() -> None:
        """The broker's log, as it comes: when it started (its port), loaded the snapshot and
        was unfenced."""
        assert proc.stdout is not None
        for line in proc.stdout:
            said.append(line)
            now = round(time.perf_counter() - t0, 3)
            found = re.search(r"started: .*?listeners=PLAINTEXT://127\.0\.0\.1:(\d+)", line)
            if found and not started.is_set():
                port.append(int(found.group(1)))
                out["started_s"] = now
                started.set()
            loaded = re.search(r"loaded metadata snapshot .*?\((\d+) bytes\) in ([\d.]+) s", line)
            if loaded:
                out["snapshot_loaded_s"] = now
                out["snapshot_load_took_s"] = float(loaded.group(2))
                out["snapshot_mb"] = round(int(loaded.group(1)) / 1e6, 1)
            if "The broker is unfenced and serving" in line:
                out["unfenced_serving_s"] = now
        started.set()

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        started.wait(START_TIMEOUT_S)
        if not port:
            raise RuntimeError("the broker did not start: " + "".join(said[-5:]))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                reader.join(10)
                tail = [line.strip() for line in said][-3:]
                raise RuntimeError(f"the broker stopped before it served every topic: {tail}")
            try:
                meta = metadata_once("127.0.0.1", port[0], 30, [last_topic])
                if meta.topics[0].error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    out["serving_every_topic_s"] = round(time.perf_counter() - t0, 3)
                    break
            except OSError:
                pass
            time.sleep(0.05)
        asked = time.perf_counter()
        meta = metadata_once("127.0.0.1", port[0], 300)
        out["full_metadata_answer_s"] = round(time.perf_counter() - asked, 3)
        if len(meta.topics) < topics:
            raise RuntimeError(f"a Metadata answer for all topics listed {len(meta.topics)} "
                               f"of {topics} topics after {last_topic} was known")  # fmt: skip
        out["rss_mb"] = round(rss_bytes(proc.pid) / 1e6, 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return out


SLOW_FAILOVER_S = 4.0
"""A failover slower than this keeps the controllers' logs (in RESULTS/logs, git-ignored)."""


def write_controller_logs(cluster: ClusterProcess, directory: Path, prefix: str) -> None:
    """Each controller's last log lines as `<prefix>-controller-<id>.log` in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for node in cluster.controllers:
        (directory / f"{prefix}-controller-{node.node_id}.log").write_text("\n".join(node.output) + "\n")


def run_one(
    n_brokers: int, n_partitions: int, log: Callable[[str], None], profile: Path | None = None
) -> RunResult:
    with (
        tempfile.TemporaryDirectory(prefix="strom-control-plane-") as tmp,
        ClusterProcess(Path(tmp) / "quorum", controllers=3, brokers=0,
                       start_timeout=START_TIMEOUT_S) as cluster,  # fmt: skip
    ):
        spies = []
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            for node in cluster.controllers:
                out = profile / f"b{n_brokers}-p{n_partitions}-controller-{node.node_id}.txt"
                spies.append(subprocess.Popen(
                    ["py-spy", "record", "--format", "raw", "--rate", "100", "--nonblocking",
                     "-p", str(node.pid), "-o", str(out)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                ))  # fmt: skip
        result = RunResult(n_brokers, n_partitions)
        try:
            trio.run(_run, cluster, result, log, Path(tmp))
        except Exception as exc:  # recorded with the figures measured before it
            while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]  # type: ignore[assignment]
            log(f"  failed: {type(exc).__name__}: {str(exc)[:2000]}")
            log("".join(traceback.format_exception(exc)[-6:]))
            result.figures["error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        finally:
            result.figures["snapshots"] = snapshot_lines(cluster)
            if profile is not None:  # each controller's log beside its stacks
                write_controller_logs(cluster, profile, f"b{n_brokers}-p{n_partitions}")
            for spy in spies:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
    return result


def snapshot_figures(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The largest snapshot written (bytes, encoding s) and the slowest load, from the
    controllers' log lines."""
    written = [(int(m[1]), float(m[2])) for x in lines
               if (m := re.search(r"metadata snapshot at .*?\((\d+) bytes, encoded in ([\d.]+) s", x["line"]))]  # fmt: skip
    loaded = [(int(m[1]), float(m[2])) for x in lines
              if (m := re.search(r"loaded metadata snapshot .*?\((\d+) bytes\) in ([\d.]+) s", x["line"]))]  # fmt: skip
    out: dict[str, Any] = {"written": len(written), "loaded": len(loaded)}
    if written:
        size, took = max(written)
        out |= {"bytes": size, "encode_s": took}
    if loaded:
        size, took = max(loaded, key=lambda x: x[1])
        out |= {"load_bytes": size, "load_s": took}
    return out


def table(results: list[RunResult]) -> str:
    rows = ["| brokers | partitions | all registered s | create partitions/s | elections in creation "
            "| propagation p50 / p99 ms (idle) | p99 under creation ms | image B/partition "
            "| snapshot MB / encode s / load s | failover: leader / heartbeats s "
            "| controller restart s | broker start: started / snapshot loaded (load s) / unfenced / "
            "serving every topic s | full Metadata answer s | error |",
            "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--|"]  # fmt: skip
    for r in results:
        f = r.figures

        def get(*path: str, f: dict[str, Any] = f) -> Any:
            value: Any = f
            for key in path:
                if not isinstance(value, dict) or key not in value:
                    return "-"
                value = value[key]
            return f"{value:,}" if isinstance(value, int) else value

        snap = snapshot_figures(f.get("snapshots", []))
        mb = f"{snap['bytes'] / 1e6:.1f}" if "bytes" in snap else "-"
        rows.append(
            f"| {r.brokers} | {r.partitions:,} | {get('register_all_s')} | "
            f"{get('create_partitions_per_s')} | {get('elections_during_creation')} | "
            f"{get('propagation_ms', 'p50')} / {get('propagation_ms', 'p99')} | "
            f"{get('propagation_under_creation_ms', 'p99')} | {get('image_bytes_per_partition')} | "
            f"{mb} / {snap.get('encode_s', '-')} / {snap.get('load_s', '-')} | "
            f"{get('failover_new_leader_s')} / {get('failover_heartbeats_answered_s')} | "
            f"{get('controller_restart_caught_up_s')} | {get('broker_startup', 'started_s')} / "
            f"{get('broker_startup', 'snapshot_loaded_s')} "
            f"({get('broker_startup', 'snapshot_load_took_s')}) / "
            f"{get('broker_startup', 'unfenced_serving_s')} / "
            f"{get('broker_startup', 'serving_every_topic_s')} | "
            f"{get('broker_startup', 'full_metadata_answer_s')} | {f.get('error', '')} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 and 30 brokers, 10k partitions")
    parser.add_argument("--brokers", type=int, help="one run: this many brokers")
    parser.add_argument("--partitions", type=int, help="one run: this many partitions")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--profile", type=Path, default=None,
                        help="py-spy every controller for the whole run: raw stacks and its log into DIR")  # fmt: skip
    args = parser.parse_args(argv)
    if args.brokers or args.partitions:
        grid = [(args.brokers or 30, args.partitions or 10_000)]
    else:
        grid = QUICK_GRID if args.quick else FULL_GRID
    began = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - began:7.1f}s] {message}", flush=True)

    results = []
    for n_brokers, n_partitions in grid:
        log(f"run: {n_brokers} brokers, {n_partitions:,} partitions")
        try:
            results.append(run_one(n_brokers, n_partitions, log, args.profile))
        except Exception as exc:  # the quorum did not start: recorded; the next run goes on
            log(f"  failed: {type(exc).__name__}: {str(exc)[:2000]}")
            error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
            results.append(RunResult(n_brokers, n_partitions, {"error": error}))
    out = {
        "meta": {**machine_info(), "elapsed_s": round(time.perf_counter() - began, 1),
                 "cpu_count": os.cpu_count()},
        "results": [{"brokers": r.brokers, "partitions": r.partitions, **r.figures} for r in results],
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    path = args.json or RESULTS / ("control_plane.quick.json" if args.quick else "control_plane.json")
    path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print()
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
