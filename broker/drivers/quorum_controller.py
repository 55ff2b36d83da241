"""`QuorumController`: the one controller host, a member of the Raft quorum of the metadata log.

Every node hosts a `RaftDriver` (`strom.broker.drivers.raft`) and a replica of the pure
`Controller` (`strom.coordinator.controller`); the metadata log *is* the Raft log. The single
node of `strom serve` is a one-voter quorum, as Kafka runs one node after `kafka-storage format
--standalone`: the same code on the same disk store, electing itself at once. A multi-node
cluster's controllers are its voters and its broker-only nodes observers. Handlers and the
broker process reach the controller only through this class (`BrokerState.controller`).

- **Records are entries** (`strom.coordinator.metadata.raft_entries`): a command's records
  become consecutive entries, so a record's offset is its entry's offset and a broker's epoch
  is the offset of its RegisterBrokerRecord, as in Kafka.
- **Apply.** Committed entries reach `apply` in offset order, a slice at a time. A command's
  records are replayed into a delta as they arrive and adopted together once its last entry is
  committed (`Provenance(last offset, its epoch,
  timestamp)`), so a replica never shows half a command; each adopted delta is published to the
  subscribers (`subscribe`, `subscribe_deltas`) in order by one task. The high watermark may
  stop inside a large command (a follower fetched part of it); if the leader then fails, the
  command's tail is lost and the next epoch's entries follow its committed prefix: every
  replica drops that prefix alike (`_drop_cut_command`), as Kafka never applies part of a batch.
- **Snapshots.** Every `SNAPSHOT_INTERVAL_BYTES` of applied entries (and on `snapshot()`) the
  image is handed to the Raft driver as its snapshot; the Raft log below it is dropped, and a
  follower that falls behind it fetches it.
- **Leading.** Only the Raft leader runs commands. A new leader becomes active once its high
  watermark has reached its own epoch (everything committed before is applied): it resets the
  broker leases (`Controller.activate`), writes the bootstrap records if the cluster has none
  yet (metadata.version; `bootstrap.checkpoint` from `strom format` wins), and then runs
  commands in arrival order: plan against its image, propose, wait until the entries are
  committed, applied and published, answer. A large command (CreateTopics, CreatePartitions:
  up to 10,000 partitions; fencing, unfencing or re-registering a broker: one record for each
  partition it holds) is planned, replayed and encoded PLAN_SLICE partitions at a time with
  the event loop running between slices, so this leader's Raft replica keeps answering its
  followers (else they stand for election and the command is lost). The image holds committed records only, so a
  command plans only once the one before it is settled: its records published, dropped by a
  failed write, or its leadership lost (then nothing is planned: this node is no longer
  active). A command succeeds only if the entry committed at its last offset is its own (same
  epoch, same bytes); one that loses leadership while waiting answers NOT_CONTROLLER (its
  entries may still commit, as in Kafka). A command with a deadline (BrokerHeartbeat: half
  broker.heartbeat.interval.ms, as Kafka's controller) answers REQUEST_TIMED_OUT when it
  passes, queued or waiting; the queue itself waits for the settling, never for a caller. A
  resigned leader reports no leader (`RaftCore.current_leader_id`), so a leader cut off from
  the quorum stops being active at its check-quorum and everything waiting on it answers
  NOT_CONTROLLER; commands that write nothing, such as heartbeats, are answered only by the
  active controller.
- **Not leading.** Commands answer NOT_CONTROLLER (41) in their responses (every item of an
  admin response, `strom.coordinator.controller.result.not_controller`; BrokerRegistration and
  BrokerHeartbeat in their error code); `allocate_producer_ids` raises
  ControllerError(NOT_CONTROLLER) (the broker then asks the active controller with
  AllocateProducerIds).
- **A metadata log that cannot be written** (ENOSPC, EIO): the Raft driver cuts the log back
  and drops the entries it could not write (`RaftCore.writes_failed`), so the command changes
  nothing and answers with error codes instead (`fail_unwritten`: UNKNOWN_SERVER_ERROR with the
  cause, KAFKA_STORAGE_ERROR for a producer-id block), logged once per
  WRITE_ERROR_LOG_INTERVAL_S however many fail; the next command simply tries again, so the
  controller works again as soon as the disk does. A snapshot that cannot be written is logged
  and retried after the next command.

Broker leases and offline-replica reports are the active controller's soft state. This node's
own reports (`heartbeat`) go to its local replica only: on a node that is not the active
controller they do not reach the active one yet.

This node's broker registers through `QuorumChannel`: straight to the local controller when it
is active, otherwise through `remote` (a `ControllerChannel` to the active controller, in `strom
serve` the `RemoteControllerChannel` of strom.broker.drivers.controller_channel), retrying with
`controller.quorum.retry.backoff.ms` while no controller answers.

Start-up (`open`, blocking parts in a worker thread): a member of a multi-node quorum must have
been formatted (`strom.storage.meta_properties.check_quorum_member`); a one-voter node formats
its directories itself on first start and migrates, once, the single-node metadata log older
Strom versions wrote (`strom.storage.raft.single_node_log`).
"""

from __future__ import annotations

import inspect
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import trio

from strom.broker import runtime
from strom.broker.collector import collector_paused
from strom.broker.drivers.lifecycle import BrokerLifecycle, ControllerChannel
from strom.broker.drivers.raft import RaftDriver, WriteFailure
from strom.config import BrokerConfig, Listener
from strom.config.quorum import Address
from strom.coordinator.controller.result import (
    NOT_CONTROLLER_MESSAGE,
    PLAN_SLICE,
    ApiError,
    ControllerError,
    ControllerResult,
    Planning,
    fail_unwritten,
    not_controller,
)
from strom.coordinator.controller.state_machine import LATEST_METADATA_VERSION, Controller
from strom.coordinator.metadata import single_node_log
from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import METADATA_VERSION, MetadataImage, Provenance
from strom.coordinator.metadata.kraft_checkpoint import Bootstrap, decode_bootstrap
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.coordinator.metadata.raft_entries import (
    EntryReplay,
    SnapshotLoader,
    encode_entries,
    encode_snapshot,
)
from strom.coordinator.raft.messages import NO_LEADER
from strom.storage import meta_properties
from strom.storage.meta_properties import BOOTSTRAP_FILE
from strom.storage.raft import single_node_log as stored_single_node_log
from strom.storage.raft.raft_store import Entry, QuorumState, SnapshotId
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)

if TYPE_CHECKING:
    from strom.coordinator.controller.liveness import OfflineReplicas, PartitionKey
    from strom.wire.messages.alter_client_quotas import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
    )
    from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
    from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
    from strom.wire.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    )
    from strom.wire.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    )
    from strom.wire.messages.create_acls import CreateAclsRequest, CreateAclsResponse
    from strom.wire.messages.create_partitions import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
    )
    from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
    from strom.wire.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
    from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
    from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
    from strom.wire.messages.incremental_alter_configs import (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from strom.wire.messages.list_partition_reassignments import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )

log = logging.getLogger("strom.controller")

ImageListener = Callable[[MetadataImage], Awaitable[None] | None]
DeltaListener = Callable[[MetadataImage, MetadataDelta], Awaitable[None] | None]

R = TypeVar("R")
T = TypeVar("T")
M = TypeVar("M", bound=Message)
A = TypeVar("A", BrokerRegistrationResponse, BrokerHeartbeatResponse)

SNAPSHOT_INTERVAL_BYTES = 20 * 1024 * 1024
"""Kafka's metadata.log.max.record.bytes.between.snapshots default."""
LOAD_SLICE_BYTES = 64 * 1024
"""A snapshot is decoded this much at a time, the event loop running between slices (about
1,000 partitions: milliseconds)."""
WRITE_ERROR_LOG_INTERVAL_S = 10.0
"""A failing disk refuses every command (Metadata auto-creation too): one log line per interval."""


wall_clock_ms = runtime.wall_clock_ms
"""Record timestamps: the wall clock, in milliseconds."""

monotonic_ms = runtime.monotonic_ms
"""Lease time: a wall-clock jump must not expire (or extend) every broker's lease."""


class NotActiveController(Exception):
    """This node is not (or stopped being) the active controller before the command's records
    were committed."""


class CommandTimedOut(Exception):
    """The command's deadline passed before it was answered (Kafka's TimeoutException:
    REQUEST_TIMED_OUT). Records it proposed, if any, may still commit."""


@dataclass(slots=True)
class _Proposal:
    """A command's records proposed to Raft, not yet settled."""

    epoch: int
    """The epoch they were proposed in (this node leading)."""
    last: int
    """The offset of the command's last entry."""
    last_entry: bytes
    """That entry's bytes."""
    failed_before: WriteFailure | None
    """The driver's latest write failure when they were proposed (a newer one covering `last`
    dropped them)."""
    own: bool | None = None
    """Once the entry at `last` is applied: whether it is this command's (same epoch and bytes)
    or another's (another leader's, or this leader's after a failed write cut the log back)."""


class RemoteChannelFactory(Protocol):
    """Makes the channel to the active controller from where it is (`lookup`) and an event
    source set when that may have changed (`changes`)."""

    def __call__(
        self, lookup: Callable[[], Address | None], *, changes: Callable[[], trio.Event]
    ) -> ControllerChannel: ...


def _load(
    config: BrokerConfig, new_uuid: Callable[[], uuid.UUID]
) -> tuple[str, Bootstrap | None]:
    """Blocking start-up: the directories are formatted as this node needs (see the module
    docstring), the single-node log of an older Strom is migrated; (cluster id, what
    `bootstrap.checkpoint` holds or None)."""
    directory = Path(config.metadata_dir)
    if config.runs_quorum:
        if stored_single_node_log.holds_single_node_log(directory):
            raise MetadataError(
                f"{directory} holds a single-node metadata log, which a member of a multi-node "
                "quorum cannot reuse; move it away (use an empty metadata.log.dir) or run this "
                "node alone again without controller.quorum.voters"
            )
        meta_properties.check_quorum_member(
            directory, voter=config.node_id in config.quorum_voters, cluster_id=config.cluster_id
        )
    cluster_id = meta_properties.ensure_meta_properties(
        config.data_dirs,
        directory,
        node_id=config.node_id,
        cluster_id=config.cluster_id,
        new_uuid=new_uuid,
    )
    data = meta_properties.read_bootstrap(directory)
    bootstrap = None if data is None else decode_bootstrap(data, BOOTSTRAP_FILE)
    if not config.runs_quorum:
        _migrate_single_node_log(directory, config.node_id)
    return cluster_id, bootstrap


def _migrate_single_node_log(directory: Path, node_id: int) -> None:
    """Turn the single-node metadata log of an older Strom into this one-voter quorum's Raft
    state, once: its image becomes the Raft snapshot the log starts after."""
    found = stored_single_node_log.read(directory)
    if found is None:
        return
    image = single_node_log.image_of(found.snapshot, found.batches)
    end, epoch = image.provenance.offset + 1, max(image.provenance.epoch, 0)
    stored_single_node_log.replace(
        directory,
        QuorumState(leader_epoch=epoch, voters=frozenset({node_id})),
        SnapshotId(end, epoch),
        encode_snapshot(image),
    )


class QuorumController:
    """This node's controller on the Raft quorum. Create with `await QuorumController.open(config)`,
    then keep `run` going (a task) until `close`; `start` registers this node's broker. See the
    module docstring."""

    def __init__(
        self,
        config: BrokerConfig,
        controller: Controller,
        *,
        cluster_id: str,
        metadata_version: int,
        features: Mapping[str, int] | None,
        scram: Sequence[Message] = (),
        clock: Callable[[], int],
        snapshot_interval_bytes: int,
        remote: RemoteChannelFactory | None,
    ) -> None:
        self._config = config
        self._controller = controller
        self.cluster_id = cluster_id
        self._metadata_version = metadata_version
        self._features = dict(features or {})
        self._scram = list(scram)
        """The first users' SCRAM credentials (`strom format --add-scram`), written with the
        bootstrap records."""
        self._clock = clock
        self._snapshot_interval = snapshot_interval_bytes
        self._since_snapshot = 0
        self._voters = dict(config.quorum_voters)
        self.raft = RaftDriver.from_config(config, cluster_id, self)
        """The Raft replica (the broker serves its RPCs: `BrokerState.raft`)."""
        self._listeners: list[DeltaListener] = []
        self._leadership_check = trio.Event()
        """Set to run the leadership check now (a config change may allow unclean elections)."""
        self._lock = trio.Lock()
        """Commands plan and propose one at a time, in arrival order (trio's lock is fair)."""
        self._proposal: _Proposal | None = None
        """The last command's records, until applied (see `_settled`)."""
        self._snapshotting = False
        self._snapshot_idle = trio.Event()
        self._snapshot_idle.set()
        """Set while no snapshot is being encoded in the background."""
        self._relay_nursery: trio.Nursery | None = None
        """A snapshot is being encoded (in a worker thread)."""
        self._closed = False
        self._pending = 0
        """Records of a command whose last entry is not committed yet..."""
        self._entry_replay = EntryReplay()
        self._staging: MetadataDelta | None = None
        """... replayed into this delta as they are applied (a slice at a time), adopted with
        the command's last entry."""
        self._pending_epoch = -1
        """The epoch of `_pending`'s entries."""
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
        self._quiet_until = -math.inf
        self._unlogged = 0
        """Refused commands not yet logged (one line per WRITE_ERROR_LOG_INTERVAL_S)."""
        self._channel = QuorumChannel(
            self,
            remote(self._active_address, changes=self.next_change) if remote is not None else None,
            config.controller_quorum_retry_backoff_ms,
        )
        self.local_broker = BrokerLifecycle(
            config,
            self._channel,
            registration=partial(
                controller.local_registration,
                log_dirs=meta_properties.log_directory_ids(config.data_dirs),
            ),
            metadata_offset=lambda: self.image.provenance.offset,
        )
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
        """Check (or format) the directories, recover the Raft store and build the node;
        nothing runs until `run`. MetadataError, FormatError, RaftLogError or QuorumStateError
        (one line each) when the directories cannot be used.

        `remote(lookup, changes=...)` makes the channel this node's broker registers through when
        this node is not the active controller (`lookup()`: the active controller's address or
        None; `changes()`: an event set at the next change, `next_change`).
        """
        cluster_id, bootstrap = await runtime.to_thread(_load, config, new_uuid)
        scram: list[Message] = []
        if bootstrap is not None:  # what `strom format` chose wins over the defaults
            levels = dict(bootstrap.levels)
            metadata_version = levels.pop(METADATA_VERSION, metadata_version)
            features, scram = levels, list(bootstrap.scram)
        controller = Controller(config, new_uuid=new_uuid, cluster_id=cluster_id)
        node = cls(
            config,
            controller,
            cluster_id=cluster_id,
            metadata_version=metadata_version,
            features=features,
            scram=scram,
            clock=clock,
            snapshot_interval_bytes=snapshot_interval_bytes,
            remote=remote,
        )
        await runtime.to_thread(node.raft.load)
        return node

    # --- reading ---------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The latest published image (committed commands only)."""
        return self._controller.image

    @property
    def node_id(self) -> int:
        return self._controller.node_id

    @property
    def broker_epoch(self) -> int:
        """This node's broker epoch (the offset of its latest registration)."""
        return self.local_broker.broker_epoch

    @property
    def offline_replicas(self) -> OfflineReplicas:
        """Replicas their brokers reported unable to serve (see coordinator.controller.liveness)."""
        return self._controller.offline_replicas

    @property
    def epoch(self) -> int:
        """The Raft epoch this node knows (and writes under, when active)."""
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
        """Voter `node_id`'s controller address (controller.quorum.voters; None when not
        configured, as on the single node of `strom serve`)."""
        return self._voters.get(node_id)

    def _active_address(self) -> Address | None:
        leader = self.active_controller_id
        return None if leader is None else self.controller_address(leader)

    def next_change(self) -> trio.Event:
        """Set at the next publish or Raft change (take it before reading the state)."""
        return self._changed

    # --- subscribers ----------------------------------------------------------------------------

    def subscribe(self, listener: ImageListener) -> Callable[[], None]:
        """Call `listener(image)` after each change (awaited if it returns an awaitable)."""
        return self.subscribe_deltas(lambda image, _delta: listener(image))

    def subscribe_deltas(self, listener: DeltaListener) -> Callable[[], None]:
        """Call `listener(image, delta)` after each change; returns an unsubscribe function.
        Listeners run in order, before the command that made the change is answered; they
        must not run commands (one runs at a time: that would deadlock)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def _publish(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Hand an adopted change to every subscriber, in order; one failing is logged only."""
        for listener in list(self._listeners):
            try:
                outcome = listener(image, delta)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                log.exception("metadata listener %r failed", listener)

    # --- the Raft state machine ----------------------------------------------------------------

    def apply(self, entries: list[Entry]) -> None:
        """Committed entries (RaftStateMachine): replay whole commands, queue them to publish."""
        proposal = self._proposal
        for entry in entries:
            if proposal is not None and entry.offset == proposal.last:
                proposal.own = entry.epoch == proposal.epoch and entry.data == proposal.last_entry
            if self._pending and entry.epoch != self._pending_epoch:
                self._drop_cut_command(entry)
            if not entry.control:
                if self._staging is None:
                    self._staging = self._controller.image.delta()
                remaining, timestamp = self._entry_replay.replay(self._staging, entry.data)
                self._pending += 1
                self._pending_epoch = entry.epoch
                self._since_snapshot += len(entry.data)
                if remaining:
                    continue
                delta, self._staging = self._staging, None
                delta.apply(Provenance(entry.offset, entry.epoch, timestamp))
                self._controller.adopt(delta)
                self._pending = 0
                self._last_record = entry.offset
                self._to_publish.send_nowait((self._controller.image, delta, entry.offset))
            if not self._pending:
                self._boundary = entry.offset + 1

    def _drop_cut_command(self, entry: Entry) -> None:
        """The entries of a command whose tail never reached the log: one leader proposes all
        of a command's entries together in its epoch, so an entry of another epoch (the next
        leader's control entry first) means the rest was lost with the old leader, after a
        prefix had been committed (a follower fetched part of a large command, then the
        leader failed). The command never happened: its records are dropped, on every replica
        alike, as they all read the same log."""
        log.warning(
            "node %d: dropped %d record(s) of a command cut short by a leader change "
            "(epoch %d, before offset %d); it was never committed whole",
            self.node_id, self._pending, self._pending_epoch, entry.offset,
        )  # fmt: skip
        self._pending, self._staging = 0, None

    async def load_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """Replace the replica's image with a snapshot's (RaftStateMachine), decoded
        LOAD_SLICE_BYTES at a time with the event loop running between slices: meanwhile this
        node's Raft replica fetches and votes, its broker heartbeats (fenced: the metadata
        offset it reports is not caught up) and its listeners answer."""
        began = time.perf_counter()
        loader = SnapshotLoader(data)
        with collector_paused():  # a million partitions: about five full collections saved
            while loader.step(LOAD_SLICE_BYTES):
                await trio.lowlevel.checkpoint()
            image, delta = loader.result()
        log.info(
            "node %d: loaded metadata snapshot %s (%d bytes) in %.2f s",
            self.node_id, snapshot, len(data), time.perf_counter() - began,
        )  # fmt: skip
        self._controller.reset(image)
        self._pending, self._staging = 0, None
        self._boundary = snapshot.end_offset
        self._last_record = image.provenance.offset
        self._since_snapshot = 0
        self._to_publish.send_nowait((image, delta, image.provenance.offset))

    def snapshot_failed(self, snapshot: SnapshotId, error: OSError) -> None:
        """The store could not write a snapshot of ours (RaftStateMachine): the log it would
        have cut stays; take the next one after the next command."""
        log.error("metadata snapshot %s failed (%s); retried after the next command", snapshot,
                  error.strerror or error)  # fmt: skip
        self._since_snapshot = self._snapshot_interval

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
        """(Re-)register this node's broker (broker role only) with `endpoints` (default: the
        configured advertised endpoints) unless it is already registered with exactly those,
        and wait until it is unfenced and this node's own image says so.

        The heartbeat that unfences a broker is answered once its record is committed, which
        this node (a follower of the quorum) may not have applied yet; the broker serves
        clients after this returns, and its first Metadata answer must list itself. The wait
        for the image is bounded by half the session timeout: nothing heartbeats meanwhile."""
        if "broker" not in self._config.roles:
            return
        wanted = list(endpoints if endpoints is not None else self._config.advertised_endpoints)
        await self.local_broker.register(wanted)
        with trio.move_on_after(self._config.broker_session_timeout_ms / 2000):
            while True:
                changed = self.next_change()
                if self._unfenced_in_image():
                    break
                await changed.wait()

    def _unfenced_in_image(self) -> bool:
        registration = self.image.broker(self.node_id)
        return (
            registration is not None
            and not registration.fenced
            and registration.epoch == self.broker_epoch
        )

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

    async def snapshot(self) -> SnapshotId | None:
        """Snapshot the applied image now, and wait until it is on disk (None: the log holds
        nothing after the last snapshot)."""
        async with self._lock:
            self._check_open()
            await self._snapshot_idle.wait()  # one being encoded in the background lands first
            snapshot_id = self._take_snapshot()
            if snapshot_id is not None:
                await self.raft.writes_done()
            return snapshot_id

    # --- commands -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the controller is closed")

    async def _run_command(
        self,
        command: Callable[[int], ControllerResult[R] | Planning[R]],
        *,
        wait: bool = True,
        timeout_ms: int | None = None,
    ) -> R:
        """Plan `command(offset its first record will get)` as the active controller once the
        command before it is settled (a command planned in steps, `Planning`, with the event
        loop running between them: `_stepped`), commit its records, answer. NotActiveController when this
        node is not (or stops being) the active controller; with `wait`, a node that was just
        elected first waits (briefly) until it is active; CommandTimedOut once `timeout_ms` (the
        request's deadline, where Kafka gives one) has passed. Records the metadata log refuses
        change nothing: the answer carries the error (`_unwritten`)."""
        self._check_open()
        deadline = math.inf if timeout_ms is None else trio.current_time() + timeout_ms / 1000
        with trio.move_on_at(deadline) as waiting:
            if wait:
                await self._await_catch_up()
            async with self._lock:
                await self._settled()
                epoch = self._active_epoch
                if not self.is_active or epoch is None:
                    raise NotActiveController
                core = self.raft.core
                assert core is not None
                # The deadline bounds the wait before and after, not the plan once begun (as
                # Kafka's controller times out a queued event only): a plan in steps cut at
                # every deadline would never be proposed (a heartbeat's controlled shutdown of
                # a broker leading 100,000 partitions plans for longer than its deadline).
                if not waiting.cancel_called:
                    waiting.deadline = math.inf
                planned = command(core.log.end_offset)
                result = (
                    planned
                    if isinstance(planned, ControllerResult)
                    else await self._stepped_as_leader(planned, epoch)
                )
                if not result.records:
                    return result.response
                proposal = await self._propose(result.records, epoch)
            waiting.deadline = deadline
            try:
                await self._committed(proposal)
            except OSError as exc:
                return self._unwritten(result.response, exc)
            return result.response
        raise CommandTimedOut

    def _unwritten(self, response: R, exc: OSError) -> R:
        """The answer when the metadata log refused the records: nothing changed, and the log is
        back at its last good length, so the same command works once the disk does."""
        cause = f"the metadata log could not be written: {exc.strerror or exc}"
        now = runtime.monotonic_ms() / 1000
        if now >= self._quiet_until:
            self._quiet_until = now + WRITE_ERROR_LOG_INTERVAL_S
            also = f" ({self._unlogged} more since the last report)" if self._unlogged else ""
            self._unlogged = 0
            log.error(
                "%s in %s; the command was refused and nothing changed%s: free space or fix "
                "the disk, the controller carries on by itself",
                cause, self.raft.metadata_dir, also,
            )  # fmt: skip
        else:
            self._unlogged += 1
        if isinstance(response, Message):
            return fail_unwritten(response, ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, cause))
        raise ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, cause) from exc

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

    async def _propose(self, records: Sequence[Message], epoch: int) -> _Proposal:
        """Propose `records` in `epoch` (this node leading it); NotActiveController if it does
        not lead it any more. Replayed (records that would not apply must never be proposed)
        and encoded PLAN_SLICE records at a time, the event loop running between slices: the
        10,001 records of a CreateTopics of 10,000 partitions take a good part of a second,
        which this leader's Raft replica (its followers' fetches) must not wait for."""
        await self._stepped_as_leader(self._controller.stage_steps(records), epoch)
        timestamp = self._clock()
        entries: list[bytes] = []
        for start in range(0, len(records), PLAN_SLICE):
            if start:
                await trio.lowlevel.checkpoint()
                self._check_leading(epoch)
            chunk = records[start : start + PLAN_SLICE]
            entries += encode_entries(chunk, timestamp, after=len(records) - start - len(chunk))
        if self.raft.epoch != epoch or self.raft.leader_id != self.node_id:
            raise NotActiveController
        failed_before = self.raft.write_failure
        first = self.raft.propose(entries)
        if first is None:
            raise NotActiveController
        self._proposal = _Proposal(epoch, first + len(entries) - 1, entries[-1], failed_before)
        return self._proposal

    def _check_leading(self, epoch: int) -> None:
        """NotActiveController unless this node still leads `epoch`: then the image is the
        one the command began with (only this node's own commands change it, one at a time);
        else the next leader's records may have been applied meanwhile, and a plan made
        against the old image (and the replica index the new one carried on) is stale."""
        if self.raft.epoch != epoch or self.raft.leader_id != self.node_id or self._closed:
            raise NotActiveController

    async def _stepped_as_leader(self, steps: Generator[None, None, T], epoch: int) -> T:
        """`_stepped`, NotActiveController as soon as this node no longer leads `epoch`
        (checked after each step's checkpoint, before the plan reads the image again)."""
        return await _stepped(steps, lambda: self._check_leading(epoch))

    def _dropped(self, proposal: _Proposal) -> WriteFailure | None:
        """The write failure that dropped `proposal`'s entries, if one did."""
        failure = self.raft.write_failure
        if failure is proposal.failed_before or failure is None or failure.end > proposal.last:
            return None
        return failure

    def _lost(self, proposal: _Proposal) -> bool:
        """This node no longer leads the epoch `proposal` was made in."""
        return (
            self.raft.epoch != proposal.epoch
            or self.raft.leader_id != self.node_id
            or self._closed
        )

    async def _settled(self) -> None:
        """Wait until the last proposal is settled: applied and published (the image holds it,
        so the next command may plan), dropped by a failed write, or this node no longer leads
        its epoch (then it plans nothing: it is not active)."""
        while True:
            change = self._changed
            proposal = self._proposal
            if (
                proposal is None
                or self._published >= proposal.last
                or self._dropped(proposal) is not None
                or self._lost(proposal)
            ):
                return
            await change.wait()

    async def _committed(self, proposal: _Proposal) -> None:
        """Wait until `proposal` is committed, applied and published; the store's OSError if a
        failed write dropped it. The entry committed at its last offset must be its own: another
        there means it was overwritten (NotActiveController, as when leadership is lost while
        waiting)."""
        while True:
            change = self._changed
            failure = self._dropped(proposal)
            if failure is not None:
                raise failure.error
            if self._published >= proposal.last:
                if not proposal.own:
                    raise NotActiveController
                return
            if self._lost(proposal):
                raise NotActiveController
            await change.wait()

    async def _run_admin(
        self, command: Callable[[], ControllerResult[M] | Planning[M]]
    ) -> M:
        try:
            return await self._run_command(lambda _offset: command())
        except NotActiveController:
            # planned against this replica only to shape the answer; nothing is written
            planned = command()
            result = planned if isinstance(planned, ControllerResult) else await _stepped(planned)
            return not_controller(result.response)

    async def create_topics(
        self, request: CreateTopicsRequest, version: int
    ) -> CreateTopicsResponse:
        return await self._run_admin(
            partial(self._controller.create_topics_steps, request, version)
        )

    async def delete_topics(
        self, request: DeleteTopicsRequest, version: int
    ) -> DeleteTopicsResponse:
        return await self._run_admin(partial(self._controller.delete_topics, request, version))

    async def create_partitions(
        self, request: CreatePartitionsRequest, version: int
    ) -> CreatePartitionsResponse:
        return await self._run_admin(
            partial(self._controller.create_partitions_steps, request, version)
        )

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest, version: int
    ) -> IncrementalAlterConfigsResponse:
        response = await self._run_admin(
            partial(self._controller.incremental_alter_configs, request, version)
        )
        self._leadership_check.set()
        return response

    async def alter_configs(
        self, request: AlterConfigsRequest, version: int
    ) -> AlterConfigsResponse:
        response = await self._run_admin(partial(self._controller.alter_configs, request, version))
        self._leadership_check.set()
        return response

    async def alter_partition(
        self, request: AlterPartitionRequest, version: int
    ) -> AlterPartitionResponse:
        """AlterPartition (API 56): a partition leader's ISR change (NOT_CONTROLLER in its
        top-level error code when this node is not the active controller)."""
        return await self._run_admin(partial(self._controller.alter_partition, request, version))

    async def elect_leaders(
        self, request: ElectLeadersRequest, version: int
    ) -> ElectLeadersResponse:
        """ElectLeaders (API 43); when not active every partition (and v1+ the top level)
        answers NOT_CONTROLLER."""
        return await self._run_admin(partial(self._controller.elect_leaders, request, version))

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest, version: int
    ) -> AlterPartitionReassignmentsResponse:
        return await self._run_admin(
            partial(self._controller.alter_partition_reassignments, request, version)
        )

    async def list_partition_reassignments(
        self, request: ListPartitionReassignmentsRequest, version: int
    ) -> ListPartitionReassignmentsResponse:
        return await self._run_admin(
            partial(self._controller.list_partition_reassignments, request, version)
        )

    async def alter_client_quotas(
        self, request: AlterClientQuotasRequest, version: int
    ) -> AlterClientQuotasResponse:
        return await self._run_admin(partial(self._controller.alter_client_quotas, request, version))

    async def create_acls(self, request: CreateAclsRequest, version: int) -> CreateAclsResponse:
        return await self._run_admin(partial(self._controller.create_acls, request, version))

    async def delete_acls(self, request: DeleteAclsRequest, version: int) -> DeleteAclsResponse:
        return await self._run_admin(partial(self._controller.delete_acls, request, version))

    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest, version: int
    ) -> AlterUserScramCredentialsResponse:
        return await self._run_admin(
            partial(self._controller.alter_user_scram_credentials, request, version)
        )

    # --- brokers ------------------------------------------------------------------------------

    def heartbeat(self, offline: Iterable[PartitionKey]) -> bool:
        """Report this broker's replicas that cannot serve (Kafka's BrokerHeartbeat
        offlineLogDirs) to the local controller's soft state: nothing to append, so it never
        waits nor fails on a full disk. True if the report changed anything."""
        try:
            return self._controller.heartbeat(self.node_id, self.broker_epoch, offline)
        except ControllerError:  # (re-)registering: the report after it counts
            return False

    async def broker_registration(
        self, request: BrokerRegistrationRequest
    ) -> BrokerRegistrationResponse:
        """BrokerRegistration (API 62): the broker epoch is the offset its record gets."""
        try:
            return await self._run_command(
                lambda offset: self._controller.broker_registration_steps(
                    request, broker_epoch=offset, now_ms=monotonic_ms()
                )
            )
        except NotActiveController:
            return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        """BrokerHeartbeat (API 63): renews the lease, may unfence, fence or shut down. Only the
        active controller answers, and only once the commands before it are settled;
        REQUEST_TIMED_OUT after half of broker.heartbeat.interval.ms, as Kafka's controller.
        The lease is renewed on arrival, before the heartbeat queues behind other commands."""
        if self.is_active:
            self._controller.touch_lease(request.broker_id, request.broker_epoch, monotonic_ms())
        try:
            return await self._run_command(
                lambda offset: self._controller.broker_heartbeat_steps(
                    request, next_offset=offset, now_ms=monotonic_ms()
                ),
                timeout_ms=self._config.broker_heartbeat_interval_ms // 2,
            )
        except NotActiveController:
            return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER, is_fenced=True)
        except CommandTimedOut:
            return BrokerHeartbeatResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, is_fenced=True)

    async def fence_stale_brokers(self) -> list[int]:
        """Fence every broker whose lease has run out, one command each (the active controller
        only); their ids."""
        fenced: list[int] = []
        while True:
            try:
                broker_id = await self._run_command(
                    lambda _offset: self._controller.fence_stale_broker_steps(monotonic_ms()),
                    wait=False,
                )
            except NotActiveController:
                return fenced
            if broker_id is None:
                return fenced
            log.info("fenced broker %d: its session timed out", broker_id)
            fenced.append(broker_id)

    async def watch_leases(self) -> None:
        """Run forever: while active, fence brokers as their leases (broker.session.timeout.ms)
        run out."""
        timeout = self._config.broker_session_timeout_ms
        while True:
            await self._await_activation()
            expiry = self._controller.next_lease_expiry()
            wait = timeout if expiry is None else min(timeout, expiry + 1 - monotonic_ms())
            await trio.sleep(max(0, wait) / 1000)
            await self.fence_stale_brokers()

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """A fresh block of producer ids for this node's broker: (first id, count).

        Raises ControllerError: STALE_BROKER_EPOCH if the broker is not registered,
        NOT_CONTROLLER unless this node is the active controller (elsewhere the broker sends
        AllocateProducerIds to the active one: strom.broker.data.producer_ids),
        KAFKA_STORAGE_ERROR if the metadata log cannot be written.
        """
        return await self.allocate_producer_ids_for(self.node_id, self.broker_epoch)

    async def allocate_producer_ids_for(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """AllocateProducerIds (API 67) for any registered broker, on the active controller."""
        try:
            return await self._run_command(
                lambda _offset: self._controller.allocate_producer_ids(broker_id, broker_epoch)
            )
        except NotActiveController as exc:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE) from exc

    # --- leadership ---------------------------------------------------------------------------

    async def check_leadership(self) -> None:
        """One leadership check on the active controller (nothing elsewhere): unclean elections
        where topics allow them, then (with auto.leader.rebalance.enable) preferred elections,
        pass after pass while capped."""
        try:
            unclean = await self._run_command(
                lambda _offset: self._controller.elect_unclean_leaders(), wait=False
            )
            if unclean:
                log.warning("elected %d leader(s) from outside the ISR (unclean election)", unclean)
            if self._config.auto_leader_rebalance_enable:
                while await self._run_command(
                    lambda _offset: self._controller.balance_leaders(), wait=False
                ):
                    pass
        except NotActiveController:
            return

    async def watch_leadership(self) -> None:
        """Run forever: while active, the leadership check every
        leader.imbalance.check.interval.seconds and right after a config change."""
        interval = self._config.leader_imbalance_check_interval_seconds
        while True:
            await self._await_activation()
            with trio.move_on_after(interval):
                await self._leadership_check.wait()
            self._leadership_check = trio.Event()
            try:
                await self.check_leadership()
            except ControllerError as exc:  # the metadata log refused it: the next check retries
                log.error("leadership check failed: %s", exc)

    # --- internals ---------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

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
            self._relay_nursery = nursery
            while True:
                change = self.raft.next_change()
                self._maybe_snapshot(nursery)
                self._notify()
                await change.wait()

    def _maybe_snapshot(self, nursery: trio.Nursery) -> None:
        """Start a snapshot in the background once `snapshot_interval_bytes` of entries were
        applied since the last one (not while one is encoding or a command is half applied)."""
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
        self._snapshot_idle = trio.Event()
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
                return  # a snapshot from the leader (or `snapshot()`) was installed meanwhile
            snapshot_id = self.raft.snapshot(end, data)
            log.info(
                "node %d: metadata snapshot at %s (%d bytes, encoded in %.2f s)",
                self.node_id, snapshot_id, len(data), encoded,
            )  # fmt: skip
        finally:
            self._snapshotting = False
            self._snapshot_idle.set()

    async def snapshots_settled(self) -> None:
        """Return once no snapshot is due or being encoded and every write asked of the Raft
        store so far is done (a snapshot that failed is retried only after the next command)."""
        while True:
            if self._relay_nursery is not None:
                self._maybe_snapshot(self._relay_nursery)
            if not self._snapshotting:
                break
            await self._snapshot_idle.wait()
        await self.raft.writes_done()

    def _take_snapshot(self) -> SnapshotId | None:
        """Hand the image to the Raft driver now as the snapshot of every entry below it,
        encoded here (`snapshot()`; None when nothing new is applied, or a command is half
        applied)."""
        core = self.raft.core
        end = self._boundary
        if core is None or self._pending or not core.log.start_offset < end <= core.high_watermark:
            return None
        self._since_snapshot = 0
        snapshot_id = self.raft.snapshot(end, encode_snapshot(self.image))
        log.info("node %d: metadata snapshot at %s", self.node_id, snapshot_id)
        return snapshot_id

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
        records = self._controller.bootstrap(self._metadata_version, self._features, self._scram)
        if records:
            try:
                async with self._lock:
                    await self._settled()
                    proposal = await self._propose(records, epoch)
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


async def _stepped(
    steps: Generator[None, None, T], between: Callable[[], None] | None = None
) -> T:
    """Run work done in steps (`Planning`, `Controller.stage_steps`) to its end, letting the
    event loop run between steps, and then `between` (which may raise to end the work)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        await trio.lowlevel.checkpoint()
        if between is not None:
            between()


class QuorumChannel:
    """This node's broker's `ControllerChannel`: the local controller when it is active (or
    there is no remote one: the single node), else `remote`; NOT_CONTROLLER answers (no active
    controller reachable yet) are retried every controller.quorum.retry.backoff.ms until the
    caller's own timeout."""

    def __init__(
        self, controller: QuorumController, remote: ControllerChannel | None, backoff_ms: int
    ) -> None:
        self._controller = controller
        self._remote = remote
        self._backoff_s = backoff_ms / 1000

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        return await self._until_answered(
            lambda remote: (
                remote.register(request)
                if remote is not None
                else self._controller.broker_registration(request)
            )
        )

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        return await self._until_answered(
            lambda remote: (
                remote.heartbeat(request)
                if remote is not None
                else self._controller.broker_heartbeat(request)
            )
        )

    async def _until_answered(self, ask: Callable[[ControllerChannel | None], Awaitable[A]]) -> A:
        """`ask` the local controller (None) when it is active or there is no remote, else the
        remote one; again after the backoff while the answer is NOT_CONTROLLER."""
        while True:
            remote = None if self._controller.is_active else self._remote
            response = await ask(remote)
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
