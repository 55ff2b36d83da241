"""The trio driver hosting one `RaftCore`: clock, disk, network and state machine around it.

The core (`strom.coordinator.raft.core`) is pure; this driver feeds it and carries out what it
asks (see `strom.coordinator.raft.effects`):

- **Clock.** Times are milliseconds of trio's clock. The run loop sleeps until the core's
  `next_deadline()` (or until an input may have moved it) and calls `tick`.
- **Disk.** Writes (quorum state, appends, truncations, snapshots) go to a `DiskRaftStore` in a
  worker thread, in the order the core emitted them, a batch at a time; then
  `writes_durable(highest seq)`. Each store call fsyncs before it returns. A write the store
  refuses (ENOSPC, EIO) leaves the store as it was. If it and every write after it are
  appends, the core drops those entries (`RaftCore.writes_failed`: a leader's own, never sent)
  and `write_failure` tells the state machine's host, whose command then fails instead of
  committing; a snapshot of this replica's own state that cannot be written is skipped (the
  log it would have cut stays) and the state machine is told (`snapshot_failed`). Any other
  failed write stops the driver (`RaftStoreFailure`), as Kafka halts a node whose metadata
  log cannot be written.
- **Network out.** One `PeerConnection` per other voter, fed by a small queue: one request at a
  time, each within `controller.quorum.request.timeout.ms`; a failure closes the connection and
  waits `controller.quorum.retry.backoff.ms` before the next. Lost requests need nothing: the
  core retries on its own timers. When the queue is full, the request is dropped (same reason).
  Requests carry the core's request id as their correlation id; versions are the newest
  Strom speaks (Vote v2 for pre-vote, Fetch v17, the others v1): every voter runs Strom.
- **Network in.** The Raft handlers (`strom.broker.handlers.vote`, ...) call `answer(request)`:
  the request goes to the core and the handler waits for the core's response with the same
  request id (a Fetch may be held there for its long poll).
- **State machine.** Committed entries (below the high watermark) go to the `RaftStateMachine`
  in offset order, control entries included (the machine skips them), by a task of their own
  in slices of about `APPLY_SLICE_BYTES`, the event loop running between slices: the records
  of a CreateTopics of 10,000 partitions take about a second to decode and replay, which
  must not hold up this replica's fetches (the leader would lose its quorum) nor the requests
  it serves. A snapshot (the one recovered at start, or one fetched from the leader) is loaded
  by the same task, before any entry after it, with `await state_machine.load_snapshot`: the
  machine loads it a slice at a time too (a million partitions take seconds), and `applied`
  reaches the snapshot's end only once it is loaded, so a node is not caught up (a leader not
  active, a broker not unfenced) before that. `propose` appends entries on the leader.

A crash is a cancelled `run` (nothing more is written); `shutdown` resigns first, as a clean
stop does in Kafka, so that another voter stands at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import trio

from strom.broker import runtime
from strom.broker.drivers.peer import PeerConnection, PeerUnavailable
from strom.broker.metrics.recorder import CommitLatency
from strom.broker.security.peer import PeerSecurity
from strom.config import BrokerConfig
from strom.config.quorum import Address
from strom.coordinator.raft import wire
from strom.coordinator.raft.core import QuorumInfo, RaftConfig, RaftCore, ReplicaInfo
from strom.coordinator.raft.effects import (
    AppendEntries,
    HighWatermark,
    InstallSnapshot,
    LeaderChange,
    PersistQuorumState,
    Send,
    SnapshotLoaded,
    TruncateTo,
    Write,
)
from strom.coordinator.raft.messages import NO_LEADER, Request, Response
from strom.storage.raft.raft_disk import DiskRaftStore
from strom.storage.raft.raft_log import DEFAULT_SEGMENT_BYTES, EncodedEntries
from strom.storage.raft.raft_store import Entry, RecoveredState, SnapshotId
from strom.wire.message import Message

log = logging.getLogger("strom.raft")

REQUEST_VERSIONS: Mapping[str, int] = {
    "VoteRequest": 2,
    "BeginQuorumEpochRequest": 1,
    "EndQuorumEpochRequest": 1,
    "FetchRequest": 17,
    "FetchSnapshotRequest": 1,
}
"""The version each outgoing Raft request (by its class in `messages`) is encoded at."""
PEER_QUEUE = 16
APPLY_SLICE_BYTES = 64 * 1024
"""About this much of committed entries is applied at a time (see the module docstring)."""


class RaftStateMachine(Protocol):
    """What sits on the replicated log (the controller's metadata, later)."""

    def apply(self, entries: list[Entry]) -> None:
        """Entries newly committed, in offset order (control entries included)."""

    async def load_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """Replace the whole state with the snapshot's (entries below its end); may take a
        while, letting the event loop run (no entry is applied meanwhile)."""

    def snapshot_failed(self, snapshot: SnapshotId, error: OSError) -> None:
        """The store could not write a snapshot the state machine took (`RaftDriver.snapshot`);
        the log below it stays, so nothing is lost: take another one later."""


class RaftStoreFailure(Exception):
    """The Raft store failed a write the replica cannot go on without."""


@dataclass(frozen=True, slots=True, eq=False)
class WriteFailure:
    """Appends the store could not write: the log was cut back to `end` (the entries from
    there on were dropped), because of `error`. A new object for every failure."""

    end: int
    error: OSError


def raft_config(config: BrokerConfig) -> RaftConfig:
    """The core's timeouts from the `controller.quorum.*` settings."""
    return RaftConfig(
        election_timeout_ms=config.controller_quorum_election_timeout_ms,
        fetch_timeout_ms=config.controller_quorum_fetch_timeout_ms,
        election_backoff_max_ms=config.controller_quorum_election_backoff_max_ms,
        request_timeout_ms=config.controller_quorum_request_timeout_ms,
        retry_backoff_ms=config.controller_quorum_retry_backoff_ms,
    )


@dataclass(slots=True)
class _Awaiting:
    """An incoming request waiting for the core's response."""

    done: trio.Event
    response: Response | None = None


class RaftDriver:
    """Hosts the Raft replica of node `node_id` until `run` is cancelled or `shutdown`."""

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, Address | None],
        metadata_dir: Path,
        cluster_id: str | None,
        state_machine: RaftStateMachine,
        config: RaftConfig | None = None,
        security: PeerSecurity | None = None,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        self.node_id = node_id
        self._security = security
        """TLS and SASL to the other voters' controller listeners, when those ask for them."""
        self.voter_ids = frozenset(voters)
        self.peers = {v: a for v, a in voters.items() if v != node_id and a is not None}
        """The other voters' controller addresses (a one-voter quorum has none)."""
        self.cluster_id = cluster_id
        self.config = config or RaftConfig()
        self.state_machine = state_machine
        self.metadata_dir = Path(metadata_dir)
        self._segment_bytes = segment_bytes
        self.store: DiskRaftStore | None = None
        """The disk store, once `load` opened it."""
        self._recovered: RecoveredState | None = None
        self.core: RaftCore | None = None
        self.applied = 0
        """Entries below this offset have gone to the state machine."""
        self._apply_ready = trio.Event()
        """Set when the high watermark moves or a snapshot is to be loaded (the apply task may
        have work)."""
        self._to_load: tuple[SnapshotId, bytes] | None = None
        """The latest snapshot the state machine has yet to load (the apply task loads it)."""
        self.snapshot_loading: SnapshotId | None = None
        """The snapshot the state machine is loading now, if any."""
        self.epoch = 0
        self.leader_id = NO_LEADER
        self._changed = trio.Event()
        self._wake = trio.Event()
        self.ticks = 0
        """How often the tick loop has woken (an idle replica wakes at its timers only)."""
        self._writes: list[Write] = []
        self._writes_ready = trio.Event()
        self._issued = 0
        """The seq of the last write handed to the write loop."""
        self._performed = 0
        self._performed_changed = trio.Event()
        self.write_failure: WriteFailure | None = None
        """The latest appends the store refused (see the module docstring)."""
        self._awaiting: dict[tuple[int, int], _Awaiting] = {}
        self._queues: dict[int, trio.MemorySendChannel[Request]] = {}
        self._peers_done: list[trio.Event] = []
        self._scope: trio.CancelScope | None = None
        self.commit_latency = CommitLatency()
        self.encoded = EncodedEntries()
        """Fetch answers' entries as batches, the last few kept (`raft_rpc`)."""
        """Append-to-commit times of this node's proposals (raft-metrics commit-latency)."""

    @classmethod
    def from_config(
        cls, config: BrokerConfig, cluster_id: str, state_machine: RaftStateMachine
    ) -> RaftDriver:
        """The driver for this node as configured (`controller.quorum.voters`, its timeouts,
        `metadata.log.segment.bytes`); with no voters configured, a one-voter quorum of itself
        (Strom's single node)."""
        if config.node_id is None or config.node_id < 0:
            raise ValueError("a Raft quorum member needs node.id")
        voters: Mapping[int, Address | None] = config.quorum_voters or {config.node_id: None}
        return cls(
            config.node_id,
            voters,
            Path(config.metadata_dir),
            cluster_id,
            state_machine,
            raft_config(config),
            PeerSecurity.to_controllers(config),
            segment_bytes=config.metadata_log_segment_bytes,
        )

    # --- what the node above uses ---------------------------------------------------------

    @staticmethod
    def now() -> int:
        """trio's clock in whole ms. Woken at a deadline of X ms (`trio.move_on_at(X / 1000)`),
        the clock may read X/1000 exactly, and X/1000 * 1000 can come out just under X (7634 ->
        7633.999...): without the nudge the tick loop saw its deadline not yet reached, slept
        until a moment already past and spun (a virtual clock lands exactly on deadlines)."""
        return int(trio.current_time() * 1000 + 1e-6)

    def propose(self, payloads: list[bytes]) -> int | None:
        """Append entries as the leader: the offset of the first, None when not the leader."""
        core = self._running()
        first = core.propose(payloads, self.now())
        if first is not None:
            self.commit_latency.proposed(first + len(payloads) - 1)
        self._drain()
        return first

    def snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """Record the state machine's image of the entries below `end_offset` (committed)."""
        core = self._running()
        snapshot_id = core.snapshot(end_offset, data)
        self._drain()
        return snapshot_id

    def describe(self) -> QuorumInfo:
        """What DescribeQuorum reports (voters are listed only by the leader), with the fetch
        times on the wall clock in ms since the epoch, as Kafka reports them (the core's
        clock is trio's, which only measures intervals)."""
        now = self.now()
        info = self._running().describe(now)
        shift = runtime.wall_clock_ms() - now

        def wall(replica: ReplicaInfo) -> ReplicaInfo:
            return replace(
                replica,
                last_fetch_ms=replica.last_fetch_ms + shift if replica.last_fetch_ms >= 0 else -1,
                last_caught_up_ms=(
                    replica.last_caught_up_ms + shift if replica.last_caught_up_ms >= 0 else -1
                ),
            )

        return replace(
            info,
            voters=tuple(wall(v) for v in info.voters),
            observers=tuple(wall(o) for o in info.observers),
        )

    @property
    def high_watermark(self) -> int:
        return self._running().high_watermark

    async def writes_done(self) -> None:
        """Return once every write the core has asked for so far is performed (or failed)."""
        wanted = self._issued
        while self._performed < wanted:
            await self._performed_changed.wait()

    def next_change(self) -> trio.Event:
        """The event set at the next change of leader, epoch or high watermark.

        Take it before reading the state it guards: a change between the read and the wait is
        then not missed (waiting on "the next change" after the read would sleep through it).
        """
        return self._changed

    async def answer(self, request: Request) -> Response:
        """The core's response to a request that arrived on a CONTROLLER listener.

        Raises trio.TooSlowError if the core gives none within the fetch wait plus the request
        timeout (the server then closes the connection; the peer retries).
        """
        core = self._running()
        src = wire.sender(request)
        key = (src, request.request_id)
        waiting = self._awaiting[key] = _Awaiting(trio.Event())
        try:
            core.receive(src, request, self.now())
            self._drain()
            timeout_ms = self.config.fetch_max_wait_ms + self.config.request_timeout_ms
            with trio.fail_after(timeout_ms / 1000):
                await waiting.done.wait()
        finally:
            if self._awaiting.get(key) is waiting:
                del self._awaiting[key]
        assert waiting.response is not None
        return waiting.response

    # --- running --------------------------------------------------------------------------

    def load(self) -> None:
        """Open the store and recover its state (blocking: run it in a worker thread; `run`
        does it if it was not done). RaftLogError or QuorumStateError if they are damaged or
        belong to another quorum."""
        store = DiskRaftStore(self.metadata_dir, self.voter_ids, segment_bytes=self._segment_bytes)
        self._recovered = store.load()
        self.store = store

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the durable state, then serve until cancelled (a crash: nothing more is written)."""
        if self._recovered is None:
            await runtime.to_thread(self.load)
        recovered, self._recovered = self._recovered, None
        assert recovered is not None
        if recovered.snapshot is not None:  # loaded by the apply task, the replica running
            self._to_load = (recovered.snapshot, recovered.snapshot_data)
        else:
            self.applied = recovered.log_start
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            for peer, address in self.peers.items():
                send, receive = trio.open_memory_channel[Request](PEER_QUEUE)
                self._queues[peer] = send
                done = trio.Event()
                self._peers_done.append(done)
                nursery.start_soon(self._peer_loop, peer, address, receive, done)
            nursery.start_soon(self._write_loop)
            nursery.start_soon(self._apply_loop)
            self.core = RaftCore(
                self.node_id,
                self.voter_ids,
                recovered,
                runtime.new_random(),
                self.now(),
                self.config,
            )
            self._drain()
            task_status.started()
            await self._tick_loop()

    async def shutdown(self) -> None:
        """A clean stop: resign leadership (EndQuorumEpoch to the voters), then stop."""
        if self.core is not None:
            self.core.resign(self.now())
            self._drain()
            for queue in self._queues.values():
                queue.close()  # the peer loops send what is queued, then end
            with trio.move_on_after(self.config.request_timeout_ms / 1000):
                for sent in self._peers_done:
                    await sent.wait()
        if self._scope is not None:
            self._scope.cancel()

    def crash(self) -> None:
        """Stop at once, as a killed process would (tests)."""
        if self._scope is not None:
            self._scope.cancel()

    def _running(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError("the Raft driver is not running")
        return self.core

    async def _tick_loop(self) -> None:
        core = self._running()
        while True:
            deadline = core.next_deadline()
            with trio.move_on_at(deadline / 1000):
                await self._wake.wait()
            self.ticks += 1
            core.tick(self.now())
            self._drain()
            # _drain sets _wake for inputs that arrive between ticks (they may move the
            # deadline); the tick's own drain must not, or this loop never sleeps.
            self._wake = trio.Event()

    def _drain(self) -> None:
        """Carry out what the core asked for after an input."""
        core = self._running()
        for effect in core.take_effects():
            match effect:
                case Send(dest, message):
                    self._send(dest, message)
                case PersistQuorumState() | AppendEntries() | TruncateTo() | InstallSnapshot():
                    self._writes.append(effect)
                    self._issued = effect.seq
                    self._writes_ready.set()
                case HighWatermark(offset):
                    self.commit_latency.committed(offset)
                    self._apply_ready.set()
                    self._notify()
                case LeaderChange(epoch, leader_id):
                    if leader_id != self.leader_id or epoch != self.epoch:
                        log.info("node %d: epoch %d leader %d", self.node_id, epoch, leader_id)
                    self.epoch, self.leader_id = epoch, leader_id
                    self._notify()
                case SnapshotLoaded(snapshot):
                    self._to_load = (snapshot, core.log.snapshot_data)
                    self._apply_ready.set()
        self._wake.set()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _apply_loop(self) -> None:
        """Load snapshots and apply committed entries a slice at a time, letting the loop run
        between slices."""
        while True:
            if self._to_load is not None:
                (snapshot, data), self._to_load = self._to_load, None
                self.snapshot_loading = snapshot
                try:
                    await self.state_machine.load_snapshot(snapshot, data)
                finally:
                    self.snapshot_loading = None
                self.applied = snapshot.end_offset
                self._notify()
                continue  # a newer one may have come meanwhile: it goes first
            core = self._running()
            if self._apply_slice(core):
                self._notify()
                await trio.lowlevel.checkpoint()
                continue
            self._apply_ready = trio.Event()  # no checkpoint since the check: nothing missed
            await self._apply_ready.wait()

    def _apply_slice(self, core: RaftCore) -> bool:
        """Apply the next committed entries, about APPLY_SLICE_BYTES of them; False if there
        were none."""
        high_watermark = core.high_watermark
        if self.applied < core.log.start_offset:
            # already folded into the snapshot the state machine loaded
            self.applied = core.log.start_offset
        if self.applied >= high_watermark:
            return False
        batch = [
            e
            for e in core.log.entries_from(self.applied, APPLY_SLICE_BYTES)
            if e.offset < high_watermark
        ]
        if not batch:
            return False
        self.state_machine.apply(batch)
        self.applied = batch[-1].offset + 1
        return True

    def _send(self, dest: int, message: Request | Response) -> None:
        if isinstance(message, Request):
            queue = self._queues.get(dest)
            if queue is None:
                return  # an observer we cannot reach; it fetches from us
            try:
                queue.send_nowait(message)
            except trio.WouldBlock:
                log.debug("node %d: queue to %d full, dropping %s", self.node_id, dest, message)
            except trio.ClosedResourceError:
                pass  # shutting down
            return
        waiting = self._awaiting.pop((dest, message.request_id), None)
        if waiting is not None:
            waiting.response = message
            waiting.done.set()

    async def _write_loop(self) -> None:
        while True:
            await self._writes_ready.wait()
            self._writes_ready = trio.Event()
            batch, self._writes = self._writes, []
            if not batch:
                continue
            done, failed, skipped = await runtime.to_thread(self._perform, batch)
            core = self._running()
            if done:
                core.writes_durable(max(w.seq for w in done), self.now())
            for snapshot, error in skipped:
                self.state_machine.snapshot_failed(snapshot, error)
            performed = max(w.seq for w in batch)
            if failed is not None:
                void = [*batch[len(done) :], *self._writes]
                self._writes = []
                performed = max(performed, *(w.seq for w in void))
                self._write_failed(core, void, failed)
            self._performed = performed
            self._performed_changed.set()
            self._performed_changed = trio.Event()
            self._drain()

    def _perform(
        self, batch: list[Write]
    ) -> tuple[list[Write], OSError | None, list[tuple[SnapshotId, OSError]]]:
        """Carry out `batch` in order (in a worker thread): the writes done, the error that
        stopped it (None: none did), and the snapshots of this replica's own state that failed
        and were skipped."""
        store = self.store
        assert store is not None
        done: list[Write] = []
        skipped: list[tuple[SnapshotId, OSError]] = []
        for write in batch:
            try:
                match write:
                    case PersistQuorumState(_, state):
                        store.write_quorum_state(state)
                    case AppendEntries(_, entries):
                        store.append(list(entries))
                    case TruncateTo(_, offset):
                        store.truncate_to(offset)
                    case InstallSnapshot(_, snapshot, data, reset_log):
                        store.install_snapshot(snapshot, data, reset_log=reset_log)
            except OSError as exc:
                if not isinstance(write, InstallSnapshot) or not _own_snapshot(
                    write, store.end_offset
                ):
                    return done, exc, skipped
                skipped.append((write.snapshot, exc))
            done.append(write)
        return done, None, skipped

    def _write_failed(self, core: RaftCore, void: Sequence[Write], error: OSError) -> None:
        """Writes the store did not perform, the first of them failed with `error`: dropped
        if they are all appends the core can do without, else the replica stops."""
        first = void[0]
        if all(isinstance(w, AppendEntries) for w in void) and core.writes_failed(first.seq):
            self.write_failure = WriteFailure(core.log.end_offset, error)
            log.debug("node %d: the metadata log could not be written (%s); %d entries from "
                      "offset %d dropped", self.node_id, error.strerror or error,
                      sum(len(w.entries) for w in void if isinstance(w, AppendEntries)),
                      core.log.end_offset)  # fmt: skip
            self._notify()
            return
        raise RaftStoreFailure(
            f"node {self.node_id}: the metadata log in {self.metadata_dir} could not be "
            f"written ({error.strerror or error}); stopping: fix the disk and start again"
        ) from error

    async def _peer_loop(
        self,
        peer: int,
        address: Address,
        requests: trio.MemoryReceiveChannel[Request],
        done: trio.Event,
    ) -> None:
        connection = PeerConnection(address, f"raft-{self.node_id}", self._security)
        timeout_s = self.config.request_timeout_ms / 1000
        try:
            async for request in requests:
                version = REQUEST_VERSIONS[type(request).__name__]
                body = wire.request_to_wire(request, peer, self.cluster_id, version)
                try:
                    raw: Message = await connection.request(
                        body, version, request.request_id, timeout_s
                    )
                    response = wire.response_from_wire(raw, request)
                except PeerUnavailable as exc:
                    log.debug("node %d: no answer from %d: %s", self.node_id, peer, exc)
                    await trio.sleep(self.config.retry_backoff_ms / 1000)
                    continue
                self._running().receive(peer, response, self.now())
                self._drain()
        finally:
            done.set()
            with trio.CancelScope(shield=True):
                await connection.aclose()


def _own_snapshot(write: InstallSnapshot, store_end: int) -> bool:
    """A snapshot of entries the store's log holds (the replica's own, not one fetched from
    the leader): skipping it leaves the store whole."""
    return not write.reset_log and write.snapshot.end_offset <= store_end
