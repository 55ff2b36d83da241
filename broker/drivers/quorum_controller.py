"""`QuorumController`: the controller of a multi-node cluster, on the Raft quorum.

Every node (a voter with the controller role, an observer with only the broker role) hosts a
`RaftDriver` and a replica of the pure `Controller`. The metadata log *is* the Raft log:

- **Records are entries.** A command's records become consecutive entries, one record each, so
  a record's offset is its entry's offset and a broker's epoch is the offset of its
  RegisterBrokerRecord, as in Kafka. Entry layout::

      remaining   uvarint   entries of the same command after this one (0: the last)
      timestamp   int64     the leader's wall clock when it proposed the command (ms, big-endian)
      record      bytes     the metadata record, framed as in the metadata log
                            (`strom.coordinator.metadata.metadata_records.encode_record`)

  The control entry a new leader writes (Kafka's LeaderChangeMessage) carries no record.
- **Apply.** Committed entries reach `apply` in offset order. A command's records are staged and
  adopted together once its last entry is committed (`Provenance(last offset, its epoch,
  timestamp)`), so a replica never shows half a command; each adopted delta is published to the
  subscribers in order by one task.
- **Snapshots.** Every `SNAPSHOT_INTERVAL_BYTES` of applied entries the image is handed to the
  Raft driver as its snapshot (the Raft log below it is dropped; a follower that falls behind it
  fetches it). Snapshot data::

      magic       4 bytes   b"SQC1"
      offset      int64     the image's provenance: last record offset
      epoch       int32     ... its epoch
      timestamp   int64     ... its timestamp
      records     repeated: uvarint length, then a framed metadata record
                            (`strom.coordinator.metadata.snapshot.image_records`)

- **Leading.** Only the Raft leader runs commands. A new leader becomes active once its high
  watermark has reached its own epoch (everything committed before is applied): it resets the
  broker leases (`Controller.activate`), writes the bootstrap records if the cluster has none
  yet (metadata.version; `bootstrap.checkpoint` from `strom format` wins), and then runs
  commands in arrival order: plan against its image, propose, wait until the entries are
  committed, applied and published, answer. The image holds committed records only, so a
  command plans only once the one before it is settled: its records published, dropped by a
  failed write, or its leadership lost (then nothing is planned: this node is no longer
  active). A command succeeds only if the entry committed at its last offset is its own (same
  epoch); one that loses leadership while waiting answers NOT_CONTROLLER (its entries may still
  commit, as in Kafka). A command with a deadline (BrokerHeartbeat: half
  broker.heartbeat.interval.ms, as Kafka's controller) answers REQUEST_TIMED_OUT when it passes,
  while queued or waiting; the queue itself waits for the settling, never for a caller. A
  resigned leader reports no leader (`RaftCore.current_leader_id`), so a leader cut off from
  the quorum stops being active at its check-quorum and everything waiting on it answers
  NOT_CONTROLLER; commands that write nothing, such as heartbeats, are answered only by the
  active controller.
- **Not leading.** Commands answer NOT_CONTROLLER (41) in their responses (every item of an
  admin response; BrokerRegistration and BrokerHeartbeat in their error code);
  `allocate_producer_ids` raises ControllerError(NOT_CONTROLLER) (the broker then asks the active
  controller with AllocateProducerIds).

Broker leases and offline-replica reports are the active controller's soft state. This node's
own reports (`heartbeat`) go to its local replica only: on a node that is not the active
controller they do not reach the active one yet.

This node's broker registers through `QuorumChannel`: straight to the local controller when it
is active, otherwise through `remote` (a `ControllerChannel` to the active controller, in `strom serve` the
`RemoteControllerChannel` of strom.broker.drivers.controller_channel), retrying with
`controller.quorum.retry.backoff.ms` while no controller answers.
"""

from __future__ import annotations

import logging
import math
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import trio

from strom.broker import runtime
from strom.broker.drivers.controller_api import (
    SNAPSHOT_INTERVAL_BYTES,
    CommandTimedOut,
    LocalControllerChannel,
    MetadataController,
    NotActiveController,
    monotonic_ms,
    prepare_node_directories,
    wall_clock_ms,
)
from strom.broker.drivers.lifecycle import ControllerChannel
from strom.broker.drivers.raft import RaftDriver
from strom.config import BrokerConfig, Listener
from strom.config.quorum import Address
from strom.coordinator.controller.result import ControllerResult
from strom.coordinator.controller.state_machine import LATEST_METADATA_VERSION, Controller
from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import METADATA_VERSION, MetadataImage, Provenance
from strom.coordinator.metadata.metadata_records import MetadataError, decode_record, encode_record
from strom.coordinator.metadata.properties import (
    read_bootstrap_scram,
    read_meta_properties,
)
from strom.coordinator.metadata.snapshot import image_records
from strom.coordinator.raft.messages import NO_LEADER
from strom.storage.raft.raft_disk import holds_single_node_log
from strom.storage.raft.raft_store import Entry, SnapshotId
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from strom.wire.primitives import read_uvarint, uvarint

log = logging.getLogger("strom.controller")

R = TypeVar("R")
A = TypeVar("A", BrokerRegistrationResponse, BrokerHeartbeatResponse)
_TIMESTAMP = struct.Struct(">q")
_SNAPSHOT_HEADER = struct.Struct(">4sqiq")
_SNAPSHOT_MAGIC = b"SQC1"


# --- the entry and snapshot encodings (see the module docstring) ---------------------------------


def encode_entries(records: Sequence[Message], timestamp: int) -> list[bytes]:
    """One entry per record; the first says how many follow."""
    count = len(records)
    return [
        uvarint(count - 1 - i) + _TIMESTAMP.pack(timestamp) + encode_record(record)
        for i, record in enumerate(records)
    ]


def decode_entry(data: bytes) -> tuple[int, int, Message]:
    """(entries of the command after this one, timestamp, record); MetadataError if malformed."""
    try:
        remaining, pos = read_uvarint(data, 0)
        (timestamp,) = _TIMESTAMP.unpack_from(data, pos)
    except (ProtocolError, struct.error) as exc:
        raise MetadataError(f"malformed metadata entry: {exc}") from exc
    record, _version = decode_record(memoryview(data)[pos + _TIMESTAMP.size :])
    return remaining, timestamp, record


def encode_snapshot(image: MetadataImage) -> bytes:
    """The image as Raft snapshot data."""
    p = image.provenance
    parts = [_SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, p.offset, p.epoch, p.timestamp)]
    for record in image_records(image):
        framed = encode_record(record)
        parts.append(uvarint(len(framed)) + framed)
    return b"".join(parts)


def decode_snapshot(data: bytes) -> tuple[MetadataImage, MetadataDelta]:
    """The image in snapshot data, and the delta that builds it from empty."""
    try:
        magic, offset, epoch, timestamp = _SNAPSHOT_HEADER.unpack_from(data, 0)
    except struct.error as exc:
        raise MetadataError(f"malformed metadata snapshot: {exc}") from exc
    if magic != _SNAPSHOT_MAGIC:
        raise MetadataError(f"not a metadata snapshot (magic {magic!r})")
    delta = MetadataImage.EMPTY.delta()
    pos, view = _SNAPSHOT_HEADER.size, memoryview(data)
    while pos < len(view):
        try:
            length, pos = read_uvarint(view, pos)
        except ProtocolError as exc:
            raise MetadataError(f"malformed metadata snapshot: {exc}") from exc
        record, _version = decode_record(view[pos : pos + length])
        delta.replay(record)
        pos += length
    return delta.apply(Provenance(offset, epoch, timestamp)), delta


@dataclass(slots=True)
class _Proposal:
    """A command's records proposed to Raft, not yet settled."""

    epoch: int
    """The epoch they were proposed in (this node leading)."""
    last: int
    """The offset of the command's last entry."""
    committed_epoch: int | None = None
    """The epoch of the entry committed at `last` once applied: `epoch` if it is this
    command's, another if another leader's entry took the offset."""


class RemoteChannelFactory(Protocol):
    """Makes the channel to the active controller from where it is (`lookup`) and an event
    source set when that may have changed (`changes`)."""

    def __call__(
        self, lookup: Callable[[], Address | None], *, changes: Callable[[], trio.Event]
    ) -> ControllerChannel: ...


def _load(
    config: BrokerConfig, new_uuid: Callable[[], uuid.UUID]
) -> tuple[str, dict[str, int] | None]:
    """Blocking start-up checks: the directory is not a single-node log, the cluster id is
    known (every member must share it), meta.properties; then the bootstrap checkpoint."""
    directory = Path(config.metadata_dir)
    if holds_single_node_log(directory):
        raise MetadataError(
            f"{directory} holds a single-node metadata log, which a member of a Raft quorum "
            "cannot reuse; move it away (use an empty metadata.log.dir) or run this node "
            "alone again without controller.quorum.voters"
        )
    if config.cluster_id is None and read_meta_properties(directory) is None:
        raise MetadataError(
            "a member of a multi-node quorum needs the cluster id every member shares: run "
            "`strom format --cluster-id ID` on each node (or set cluster.id)"
        )
    return prepare_node_directories(config, new_uuid)


class QuorumController(MetadataController):
    """One node's controller on the Raft quorum. Create with `await QuorumController.open(config)`,
    then keep `run` going (a task) until `close`; see the module docstring. The commands are
    `MetadataController`'s, over `_run_command` here."""

    def __init__(
        self,
        config: BrokerConfig,
        controller: Controller,
        *,
        cluster_id: str,
        metadata_version: int,
        features: Mapping[str, int] | None,
        clock: Callable[[], int],
        snapshot_interval_bytes: int,
        remote: RemoteChannelFactory | None,
    ) -> None:
        super().__init__(config, controller, cluster_id=cluster_id)
        self._metadata_version = metadata_version
        self._features = dict(features or {})
        self._clock = clock
        self._snapshot_interval = snapshot_interval_bytes
        self._since_snapshot = 0
        self._voters = dict(config.quorum_voters)
        self.raft = RaftDriver.from_config(config, cluster_id, self)
        """The Raft replica (the broker serves its RPCs: `BrokerState.raft`)."""
        self._lock = trio.Lock()
        """Commands plan and propose one at a time, in arrival order (trio's lock is fair)."""
        self._proposal: _Proposal | None = None
        """The last command's records, until applied (see `_settled`)."""
        self._snapshotting = False
        """A snapshot is being encoded (in a worker thread)."""
        self._closed = False
        self._pending: list[Message] = []
        """Records of a command whose last entry is not committed yet."""
        self._boundary = 0
        """The image holds exactly the entries below this offset (a snapshot may end here)."""
        self._last_record = -1
        self._published = -1
        """Records up to this offset are adopted and published."""
        self._to_publish, self._publish_queue = trio.open_memory_channel[
            tuple[MetadataImage, MetadataDelta, int]
        ](math.inf)
        self._changed = trio.Event()
        self._active_epoch: int | None = None
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()
        self._channel = QuorumChannel(
            self,
            remote(self._active_address, changes=self.next_change) if remote is not None else None,
            config.controller_quorum_retry_backoff_ms,
        )
        self.local_broker = self._local_broker_through(self._channel)
        """This node's broker (a broker-role node), registered with the active controller."""

    @classmethod
    async def open(
        cls,
        config: BrokerConfig,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        new_uuid: Callable[[], uuid.UUID] = runtime.new_uuid,
        snapshot_interval_bytes: int = SNAPSHOT_INTERVAL_BYTES,
        metadata_version: int = LATEST_METADATA_VERSION,
        features: Mapping[str, int] | None = None,
        remote: RemoteChannelFactory | None = None,
    ) -> QuorumController:
        """Check the directories and build the node; nothing runs until `run`.

        `remote(lookup, changes=...)` makes the channel this node's broker registers through when
        this node is not the active controller (`lookup()`: the active controller's address or
        None; `changes()`: an event set at the next change, `next_change`).
        """
        cluster_id, bootstrap = await runtime.to_thread(_load, config, new_uuid)
        if bootstrap is not None:  # what `strom format` chose wins over the defaults
            metadata_version = bootstrap.pop(METADATA_VERSION, metadata_version)
            features = bootstrap
        controller = Controller(config, new_uuid=new_uuid, cluster_id=cluster_id)
        return cls(
            config,
            controller,
            cluster_id=cluster_id,
            metadata_version=metadata_version,
            features=features,
            clock=clock,
            snapshot_interval_bytes=snapshot_interval_bytes,
            remote=remote,
        )

    # --- reading ---------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The Raft epoch this node knows."""
        return self.raft.epoch

    @property
    def is_active(self) -> bool:
        """This node leads the quorum and has caught up: it runs commands."""
        return (
            not self._closed
            and self.raft.leader_id == self.node_id
            and self._active_epoch == self.raft.epoch
        )

    @property
    def active_controller_id(self) -> int | None:
        """The Raft leader (None while unknown)."""
        leader = self.raft.leader_id
        return None if leader == NO_LEADER else leader

    def controller_address(self, node_id: int) -> Address | None:
        """Voter `node_id`'s controller address (controller.quorum.voters)."""
        return self._voters.get(node_id)

    def _active_address(self) -> Address | None:
        leader = self.active_controller_id
        return None if leader is None else self.controller_address(leader)

    def next_change(self) -> trio.Event:
        """Set at the next publish or Raft change (take it before reading the state)."""
        return self._changed

    # --- the Raft state machine ----------------------------------------------------------------

    def apply(self, entries: list[Entry]) -> None:
        """Committed entries (RaftStateMachine): replay whole commands, queue them to publish."""
        proposal = self._proposal
        for entry in entries:
            if proposal is not None and entry.offset == proposal.last:
                proposal.committed_epoch = entry.epoch
            if not entry.control:
                remaining, timestamp, record = decode_entry(entry.data)
                self._pending.append(record)
                self._since_snapshot += len(entry.data)
                if remaining:
                    continue
                provenance = Provenance(entry.offset, entry.epoch, timestamp)
                delta = self._controller.stage(self._pending, provenance)
                self._controller.adopt(delta)
                self._pending = []
                self._last_record = entry.offset
                self._to_publish.send_nowait((self._controller.image, delta, entry.offset))
            if not self._pending:
                self._boundary = entry.offset + 1

    def load_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """Replace the replica's image with a snapshot's (RaftStateMachine)."""
        began = time.perf_counter()
        image, delta = decode_snapshot(data)
        log.info(
            "node %d: loaded metadata snapshot %s (%d bytes) in %.2f s",
            self.node_id, snapshot, len(data), time.perf_counter() - began,
        )  # fmt: skip
        self._controller.reset(image)
        self._pending = []
        self._boundary = snapshot.end_offset
        self._last_record = image.provenance.offset
        self._since_snapshot = 0
        self._to_publish.send_nowait((image, delta, image.provenance.offset))

    # --- life cycle -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the Raft replica, the publisher and the leadership watch until `close` (or
        cancelled: a crash)."""
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._publish_loop)
                await nursery.start(self.raft.run)
                nursery.start_soon(self._relay_loop)
                nursery.start_soon(self._lead_loop)
                task_status.started()
        finally:
            self._active_epoch = None
            self._stopped.set()
            with trio.CancelScope(shield=True):
                await self._channel.aclose()

    async def start(self, endpoints: Sequence[Listener] | None = None) -> None:
        """(Re-)register this node's broker (broker role only) and wait until it is unfenced."""
        if "broker" not in self._config.roles:
            return
        wanted = list(endpoints if endpoints is not None else self._config.advertised_endpoints)
        await self.local_broker.register(wanted)

    async def shutdown(self) -> None:
        """A clean stop: resign leadership so that another voter takes over at once."""
        if self.raft.core is not None and not self._stopped.is_set():
            await self.raft.shutdown()

    async def close(self) -> None:
        """Stop (resigning first if still running); idempotent."""
        if self._closed:
            return
        await self.shutdown()
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()
        self._notify()

    # --- internals ---------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _run_command(
        self,
        command: Callable[[int], ControllerResult[R]],
        *,
        wait: bool = True,
        timeout_ms: int | None = None,
    ) -> R:
        """Plan `command(next offset of the Raft log)` as the active controller once the command
        before it is settled, commit its records, answer; NotActiveController when this node is
        not (or stops being) the active controller, CommandTimedOut after `timeout_ms`."""
        if self._closed:
            raise trio.ClosedResourceError("the controller is closed")
        deadline = math.inf if timeout_ms is None else trio.current_time() + timeout_ms / 1000
        with trio.move_on_at(deadline):
            if wait:
                await self._await_catch_up()
            async with self._lock:
                await self._settled()
                epoch = self._active_epoch
                if not self.is_active or epoch is None:
                    raise NotActiveController
                core = self.raft.core
                assert core is not None
                result = command(core.log.end_offset)
                if not result.records:
                    return result.response
                proposal = self._propose(result.records, epoch)
            await self._committed(proposal)
            return result.response
        raise CommandTimedOut

    async def _await_activation(self) -> None:
        """Wait (however long) until this node is the active controller."""
        while True:
            change = self._changed
            if self.is_active:
                return
            await change.wait()

    async def _await_catch_up(self) -> None:
        """Wait while this node leads but is still catching up (request timeout at most)."""
        with trio.move_on_after(self._config.controller_quorum_request_timeout_ms / 1000):
            while True:
                change = self._changed
                if self.is_active or self.raft.leader_id != self.node_id or self._closed:
                    return
                await change.wait()

    def _propose(self, records: Sequence[Message], epoch: int) -> _Proposal:
        """Propose `records` in `epoch` (this node leading it); NotActiveController if it does
        not lead it any more."""
        # Replay first: records that would not apply must never be proposed.
        self._controller.stage(records)
        if self.raft.epoch != epoch or self.raft.leader_id != self.node_id:
            raise NotActiveController
        first = self.raft.propose(encode_entries(records, self._clock()))
        if first is None:
            raise NotActiveController
        self._proposal = _Proposal(epoch, first + len(records) - 1)
        return self._proposal

    def _lost(self, proposal: _Proposal) -> bool:
        """This node no longer leads the epoch `proposal` was made in."""
        return (
            self.raft.epoch != proposal.epoch
            or self.raft.leader_id != self.node_id
            or self._closed
        )

    async def _settled(self) -> None:
        """Wait until the last proposal is settled: applied and published (the image holds it,
        so the next command may plan), or this node no longer leads its epoch (then it plans
        nothing: it is not active)."""
        while True:
            change = self._changed
            proposal = self._proposal
            if proposal is None or self._published >= proposal.last or self._lost(proposal):
                return
            await change.wait()

    async def _committed(self, proposal: _Proposal) -> None:
        """Wait until `proposal` is committed, applied and published. The entry committed at its
        last offset must be its own (same epoch): another leader's entry there means it was
        overwritten (NotActiveController, as when leadership is lost while waiting)."""
        while True:
            change = self._changed
            if self._published >= proposal.last:
                if proposal.committed_epoch != proposal.epoch:
                    raise NotActiveController
                return
            if self._lost(proposal):
                raise NotActiveController
            await change.wait()

    def _caught_up(self) -> bool:
        """The high watermark is in this leader's epoch and everything below it is applied."""
        core = self.raft.core
        if core is None:
            return False
        hw = core.high_watermark
        return (
            hw > 0
            and core.log.epoch_at(hw - 1) == self.raft.epoch
            and self.raft.applied >= hw
            and not self._pending
            and self._published >= self._last_record
        )

    async def _relay_loop(self) -> None:
        """Every Raft change wakes the commands and the leadership watch; snapshots are started
        here (not inside `apply`, which runs within the Raft driver's effect handling)."""
        async with trio.open_nursery() as nursery:
            while True:
                change = self.raft.next_change()
                self._maybe_snapshot(nursery)
                self._notify()
                await change.wait()

    def _maybe_snapshot(self, nursery: trio.Nursery) -> None:
        core = self.raft.core
        if (
            core is None
            or self._snapshotting
            or self._since_snapshot < self._snapshot_interval
            or self._pending
        ):
            return
        end = self._boundary
        if not core.log.start_offset < end <= core.high_watermark:
            return
        self._since_snapshot = 0
        self._snapshotting = True
        nursery.start_soon(self._snapshot, end, self.image)

    async def _snapshot(self, end: int, image: MetadataImage) -> None:
        """Encode `image` (the entries below `end`) in a worker thread: with a million partitions
        that takes seconds, which the event loop (Raft, heartbeats) must not wait for. The image
        is immutable, so the commits meanwhile do not disturb it."""
        try:
            began = time.perf_counter()
            data = await runtime.to_thread(encode_snapshot, image)
            encoded = time.perf_counter() - began
            core = self.raft.core
            if core is None or not core.log.start_offset < end <= core.high_watermark:
                return  # a snapshot from the leader was installed meanwhile
            snapshot_id = self.raft.snapshot(end, data)
            log.info(
                "node %d: metadata snapshot at %s (%d bytes, encoded in %.2f s)",
                self.node_id, snapshot_id, len(data), encoded,
            )  # fmt: skip
        finally:
            self._snapshotting = False

    async def _lead_loop(self) -> None:
        """Become the active controller when elected and caught up; stop being it when not."""
        while True:
            change = self._changed
            if self.raft.leader_id != self.node_id:
                if self._active_epoch is not None:
                    log.info("node %d is no longer the active controller", self.node_id)
                    self._active_epoch = None
            elif self._active_epoch != self.raft.epoch and self._caught_up():
                await self._activate(self.raft.epoch)
                continue
            await change.wait()

    async def _activate(self, epoch: int) -> None:
        own = self.node_id if "broker" in self._config.roles else None
        # A broker of this process not registered yet cannot still be running elsewhere (its
        # directories are locked here): no lease, so its new registration is not refused.
        except_broker = own if self.local_broker.broker_epoch < 0 else None
        self._controller.activate(monotonic_ms(), except_broker=except_broker)
        records = self._controller.bootstrap(
            self._metadata_version,
            self._features,
            read_bootstrap_scram(Path(self._config.metadata_dir)),
        )
        if records:
            try:
                async with self._lock:
                    await self._settled()
                    proposal = self._propose(records, epoch)
                await self._committed(proposal)
            except NotActiveController:
                return
            log.info("node %d bootstrapped the cluster metadata", self.node_id)
        if self.raft.epoch == epoch and self.raft.leader_id == self.node_id:
            self._active_epoch = epoch
            log.info("node %d is the active controller (epoch %d)", self.node_id, epoch)
            self._notify()

    async def _publish_loop(self) -> None:
        async for image, delta, offset in self._publish_queue:
            await self._publish(image, delta)
            self._published = offset
            self._notify()


class QuorumChannel:
    """This node's broker's `ControllerChannel` on a quorum: the local controller when it is
    active, else `remote`; NOT_CONTROLLER answers (no active controller reachable yet) are
    retried every controller.quorum.retry.backoff.ms until the caller's own timeout."""

    def __init__(
        self, controller: QuorumController, remote: ControllerChannel | None, backoff_ms: int
    ) -> None:
        self._controller = controller
        self._local = LocalControllerChannel(controller)
        self._remote = remote
        self._backoff_s = backoff_ms / 1000

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        return await self._until_answered(lambda channel: channel.register(request))

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        return await self._until_answered(lambda channel: channel.heartbeat(request))

    async def _until_answered(self, ask: Callable[[ControllerChannel], Awaitable[A]]) -> A:
        """`ask` the local controller when it is active (or there is no remote), else the
        remote one; again after the backoff while the answer is NOT_CONTROLLER."""
        while True:
            remote = None if self._controller.is_active else self._remote
            response = await ask(self._local if remote is None else remote)
            if response.error_code != ErrorCode.NOT_CONTROLLER:
                return response
            await self._backoff()

    async def _backoff(self) -> None:
        await trio.sleep(self._backoff_s)

    async def aclose(self) -> None:
        """Close the remote channel's connection, if it keeps one."""
        close = getattr(self._remote, "aclose", None)
        if close is not None:
            await close()
