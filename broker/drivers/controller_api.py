"""`MetadataController`: what the broker asks of its controller, single node or quorum.

Two hosts run the pure `Controller` (`strom.coordinator.controller`): `ControllerDriver`, the
single-node default (its own metadata log on disk), and `QuorumController`, a member of a Raft
quorum (`strom.broker.drivers.quorum_controller`). Handlers and the broker process only use this
surface, so they work on either (`BrokerState.controller`).

Why a base class and not only an interface: every controller command (CreateTopics, ...,
BrokerRegistration, AllocateProducerIds) and the background watches (leases, leadership) are
the same on both hosts - plan the command against the state machine, make its records durable,
answer - except for *how* records become durable and whether this node may run commands at
all. So the typed commands are written once here over one primitive each host implements its
own way, `_run_command`: the single node appends to its metadata log under a lock, the quorum
member proposes to Raft and waits until the entries are committed and applied. A host that is
not the active controller raises `NotActiveController` from it; the commands here turn that
into Kafka's answer (NOT_CONTROLLER in the response, see `not_controller`; a ControllerError
where there is no response to carry it). The single node is always active, so on it that path
never runs.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import trio

from strom.broker import runtime
from strom.broker.drivers.lifecycle import BrokerLifecycle, ControllerChannel
from strom.config import BrokerConfig
from strom.coordinator.controller.result import ControllerError
from strom.coordinator.metadata.properties import (
    ensure_meta_properties,
    log_directory_ids,
    read_bootstrap_checkpoint,
)
from strom.wire.errors import ErrorCode
from strom.wire.message import Message, Struct
from strom.wire.messages.alter_partition_reassignments import AlterPartitionReassignmentsResponse
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import BrokerRegistrationResponse
from strom.wire.messages.elect_leaders import ElectLeadersResponse
from strom.wire.messages.list_partition_reassignments import ListPartitionReassignmentsResponse

if TYPE_CHECKING:
    from strom.config import Listener
    from strom.config.quorum import Address
    from strom.coordinator.controller.liveness import OfflineReplicas, PartitionKey
    from strom.coordinator.controller.result import ControllerResult
    from strom.coordinator.controller.state_machine import Controller
    from strom.coordinator.metadata.delta import MetadataDelta
    from strom.coordinator.metadata.image import MetadataImage
    from strom.wire.messages.alter_client_quotas import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
    )
    from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
    from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
    from strom.wire.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest,
    )
    from strom.wire.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    )
    from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
    from strom.wire.messages.broker_registration import BrokerRegistrationRequest
    from strom.wire.messages.create_acls import CreateAclsRequest, CreateAclsResponse
    from strom.wire.messages.create_partitions import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
    )
    from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
    from strom.wire.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
    from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
    from strom.wire.messages.elect_leaders import ElectLeadersRequest
    from strom.wire.messages.incremental_alter_configs import (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from strom.wire.messages.list_partition_reassignments import (
        ListPartitionReassignmentsRequest,
    )

log = logging.getLogger("strom.controller")

ImageListener = Callable[["MetadataImage"], Awaitable[None] | None]
DeltaListener = Callable[["MetadataImage", "MetadataDelta"], Awaitable[None] | None]

R = TypeVar("R")
M = TypeVar("M", bound=Message)

SNAPSHOT_INTERVAL_BYTES = 20 * 1024 * 1024
"""Kafka's metadata.log.max.record.bytes.between.snapshots default."""
NOT_CONTROLLER_MESSAGE = "this node is not the active controller"


wall_clock_ms = runtime.wall_clock_ms
"""Record timestamps: the wall clock, in milliseconds."""

monotonic_ms = runtime.monotonic_ms
"""Lease time: a wall-clock jump must not expire (or extend) every broker's lease."""


def prepare_node_directories(
    config: BrokerConfig, new_uuid: Callable[[], uuid.UUID]
) -> tuple[str, dict[str, int] | None]:
    """Blocking start-up, after a host's own checks: meta.properties in every directory (see
    `ensure_meta_properties`), then the bootstrap checkpoint `strom format` may have written.
    (cluster id, bootstrap feature levels or None)."""
    directory = Path(config.metadata_dir)
    cluster_id = ensure_meta_properties(
        config.data_dirs,
        directory,
        node_id=config.node_id,
        cluster_id=config.cluster_id,
        new_uuid=new_uuid,
    )
    return cluster_id, read_bootstrap_checkpoint(directory)


class NotActiveController(Exception):
    """This node is not (or stopped being) the active controller before the command's records
    were committed."""


class CommandTimedOut(Exception):
    """The command's deadline passed before it was answered (Kafka's TimeoutException:
    REQUEST_TIMED_OUT). Records it proposed, if any, may still commit."""


def _fail_not_controller(item: Struct) -> None:
    item.error_code = ErrorCode.NOT_CONTROLLER  # type: ignore[attr-defined]
    if "error_message" in item.FIELDS:
        item.error_message = NOT_CONTROLLER_MESSAGE  # type: ignore[attr-defined]


def not_controller(response: M) -> M:
    """`response` as a controller that is not the active one answers: NOT_CONTROLLER in its
    top-level error code if it has one (ElectLeaders and the reassignment APIs also in every
    partition; ListPartitionReassignments lists nothing), else in every item."""
    if "error_code" in response.FIELDS:
        _fail_not_controller(response)
        if isinstance(response, ElectLeadersResponse):
            for result in response.replica_election_results:
                for partition in result.partition_result:
                    _fail_not_controller(partition)
        elif isinstance(response, AlterPartitionReassignmentsResponse):
            for topic in response.responses:
                for reassignment in topic.partitions:
                    _fail_not_controller(reassignment)
        elif isinstance(response, ListPartitionReassignmentsResponse):
            response.topics = []
        return response
    for name in response.FIELDS:
        items = getattr(response, name)
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, Struct) and "error_code" in item.FIELDS:
                _fail_not_controller(item)
    return response


class MetadataController(ABC):
    """The controller as the broker sees it, with the commands both hosts share (see the
    module docstring). A host sets `local_broker` in its constructor."""

    local_broker: BrokerLifecycle
    """This node's broker, registered with (and heartbeating to) the active controller."""

    def __init__(self, config: BrokerConfig, controller: Controller, *, cluster_id: str) -> None:
        self._config = config
        self._controller = controller
        self.cluster_id = cluster_id
        self._listeners: list[DeltaListener] = []
        self._leadership_check = trio.Event()
        """Set to run the leadership check now (a config change may allow unclean elections)."""

    def _local_broker_through(self, channel: ControllerChannel) -> BrokerLifecycle:
        """This node's broker, registering and heartbeating through `channel` (for a host's
        `local_broker`)."""
        return BrokerLifecycle(
            self._config,
            channel,
            registration=partial(
                self._controller.local_registration,
                log_dirs=log_directory_ids(self._config.data_dirs),
            ),
            metadata_offset=lambda: self.image.provenance.offset,
        )

    # --- what each host does its own way ----------------------------------------------------

    @abstractmethod
    async def _run_command(
        self,
        command: Callable[[int], ControllerResult[R]],
        *,
        wait: bool = True,
        timeout_ms: int | None = None,
    ) -> R:
        """Plan `command(offset its first record will get)` as the active controller, make its
        records durable and applied, and return its response. Raises NotActiveController when
        this node is not (or stops being) the active controller; with `wait`, a node that was
        just elected first waits (briefly) until it is active; CommandTimedOut once
        `timeout_ms` (the request's deadline, as Kafka gives one) has passed."""

    @abstractmethod
    async def _await_activation(self) -> None:
        """Return once this node is the active controller, however long that takes."""

    @property
    @abstractmethod
    def epoch(self) -> int:
        """The Raft epoch this node knows (and writes under, when active)."""

    @property
    @abstractmethod
    def is_active(self) -> bool:
        """This node is the active controller: it runs commands."""

    @property
    @abstractmethod
    def active_controller_id(self) -> int | None:
        """The active controller's node id (None while unknown)."""

    @abstractmethod
    def controller_address(self, node_id: int) -> Address | None:
        """Where controller `node_id` is reached (its voter entry); None if unknown."""

    @abstractmethod
    async def start(self, endpoints: Sequence[Listener] | None = None) -> None:
        """(Re-)register this node's broker with `endpoints` (default: the configured advertised
        endpoints) and wait until it is unfenced."""

    @abstractmethod
    async def close(self) -> None:
        """Stop; idempotent."""

    # --- reading ------------------------------------------------------------------------------

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

    def heartbeat(self, offline: Iterable[PartitionKey]) -> bool:
        """Report this broker's replicas that cannot serve (Kafka's BrokerHeartbeat
        offlineLogDirs) to the local controller's soft state: nothing to append, so it never
        waits nor fails on a full disk. True if the report changed anything."""
        try:
            return self._controller.heartbeat(self.node_id, self.broker_epoch, offline)
        except ControllerError:  # (re-)registering: the report after it counts
            return False

    def subscribe(self, listener: ImageListener) -> Callable[[], None]:
        """Call `listener(image)` after each change (awaited if it returns an awaitable)."""
        return self.subscribe_deltas(lambda image, _delta: listener(image))

    def subscribe_deltas(self, listener: DeltaListener) -> Callable[[], None]:
        """Call `listener(image, delta)` after each change; returns an unsubscribe function."""
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

    # --- admin commands (NOT_CONTROLLER in the response when this node is not active) ----------

    async def _run_admin(self, command: Callable[[], ControllerResult[M]]) -> M:
        try:
            return await self._run_command(lambda _offset: command())
        except NotActiveController:
            # planned against this replica only to shape the answer; nothing is written
            return not_controller(command().response)

    async def create_topics(
        self, request: CreateTopicsRequest, version: int
    ) -> CreateTopicsResponse:
        return await self._run_admin(partial(self._controller.create_topics, request, version))

    async def delete_topics(
        self, request: DeleteTopicsRequest, version: int
    ) -> DeleteTopicsResponse:
        return await self._run_admin(partial(self._controller.delete_topics, request, version))

    async def create_partitions(
        self, request: CreatePartitionsRequest, version: int
    ) -> CreatePartitionsResponse:
        return await self._run_admin(partial(self._controller.create_partitions, request, version))

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

    # --- brokers ------------------------------------------------------------------------------

    async def broker_registration(
        self, request: BrokerRegistrationRequest
    ) -> BrokerRegistrationResponse:
        """BrokerRegistration (API 62): the broker epoch is the offset its record gets."""
        try:
            return await self._run_command(
                lambda offset: self._controller.broker_registration(
                    request, broker_epoch=offset, now_ms=monotonic_ms()
                )
            )
        except NotActiveController:
            return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        """BrokerHeartbeat (API 63): renews the lease, may unfence, fence or shut down. Only the
        active controller answers, and only once the commands before it are settled;
        REQUEST_TIMED_OUT after half of broker.heartbeat.interval.ms, as Kafka's controller."""
        try:
            return await self._run_command(
                lambda offset: self._controller.broker_heartbeat(
                    request, next_offset=offset, now_ms=monotonic_ms()
                ),
                # Kafka's controller gives a heartbeat half the heartbeat interval
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
                    lambda _offset: self._controller.fence_stale_broker(monotonic_ms()), wait=False
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
        AllocateProducerIds to the active one: strom.broker.data.producer_ids).
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


class LocalControllerChannel:
    """A broker's `ControllerChannel` to the controller in its own process."""

    def __init__(self, controller: MetadataController) -> None:
        self._controller = controller

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        return await self._controller.broker_registration(request)

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        return await self._controller.broker_heartbeat(request)
