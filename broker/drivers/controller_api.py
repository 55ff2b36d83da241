"""`MetadataController`: what the broker asks of its controller, single node or quorum.

Two hosts run the pure `Controller` (`strom.coordinator.controller`): `ControllerDriver`, the
single-node default (its own metadata log on disk), and `QuorumController`, a member of a Raft
quorum (`strom.broker.drivers.quorum_controller`). Handlers and the broker process only use this
surface, so they work on either (`BrokerState.controller`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from strom.broker.drivers.lifecycle import BrokerLifecycle
    from strom.config import Listener
    from strom.config.quorum import Address
    from strom.coordinator.controller.liveness import OfflineReplicas, PartitionKey
    from strom.coordinator.metadata.delta import MetadataDelta
    from strom.coordinator.metadata.image import MetadataImage
    from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
    from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
    from strom.wire.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    )
    from strom.wire.messages.broker_heartbeat import (
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
    )
    from strom.wire.messages.broker_registration import (
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
    )
    from strom.wire.messages.create_partitions import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
    )
    from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
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

ImageListener = Callable[["MetadataImage"], Awaitable[None] | None]
DeltaListener = Callable[["MetadataImage", "MetadataDelta"], Awaitable[None] | None]


class MetadataController(Protocol):
    """The controller as the broker sees it (see the module docstring)."""

    cluster_id: str
    local_broker: BrokerLifecycle

    @property
    def image(self) -> MetadataImage: ...

    @property
    def node_id(self) -> int: ...

    @property
    def epoch(self) -> int: ...

    @property
    def broker_epoch(self) -> int: ...

    @property
    def offline_replicas(self) -> OfflineReplicas: ...

    @property
    def is_active(self) -> bool:
        """This node is the active controller: it runs commands."""
        ...

    @property
    def active_controller_id(self) -> int | None:
        """The active controller's node id (None while unknown)."""
        ...

    def controller_address(self, node_id: int) -> Address | None:
        """Where controller `node_id` is reached (its voter entry); None if unknown."""
        ...

    def heartbeat(self, offline: Iterable[PartitionKey]) -> bool: ...

    def subscribe(self, listener: ImageListener) -> Callable[[], None]: ...

    def subscribe_deltas(self, listener: DeltaListener) -> Callable[[], None]: ...

    async def start(self, endpoints: Sequence[Listener] | None = None) -> None: ...

    async def close(self) -> None: ...

    async def create_topics(
        self, request: CreateTopicsRequest, version: int
    ) -> CreateTopicsResponse: ...

    async def delete_topics(
        self, request: DeleteTopicsRequest, version: int
    ) -> DeleteTopicsResponse: ...

    async def create_partitions(
        self, request: CreatePartitionsRequest, version: int
    ) -> CreatePartitionsResponse: ...

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest, version: int
    ) -> IncrementalAlterConfigsResponse: ...

    async def alter_configs(
        self, request: AlterConfigsRequest, version: int
    ) -> AlterConfigsResponse: ...

    async def alter_partition(
        self, request: AlterPartitionRequest, version: int
    ) -> AlterPartitionResponse: ...

    async def elect_leaders(
        self, request: ElectLeadersRequest, version: int
    ) -> ElectLeadersResponse: ...

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest, version: int
    ) -> AlterPartitionReassignmentsResponse: ...

    async def list_partition_reassignments(
        self, request: ListPartitionReassignmentsRequest, version: int
    ) -> ListPartitionReassignmentsResponse: ...

    async def watch_leadership(self) -> None:
        """Run forever: on the active controller, every leader.imbalance.check.interval.seconds
        (and at once after a config change) elect unclean leaders where topics allow it and,
        with auto.leader.rebalance.enable, move leadership back to preferred replicas."""
        ...

    async def broker_registration(
        self, request: BrokerRegistrationRequest
    ) -> BrokerRegistrationResponse: ...

    async def broker_heartbeat(
        self, request: BrokerHeartbeatRequest
    ) -> BrokerHeartbeatResponse: ...

    async def fence_stale_brokers(self) -> list[int]: ...

    async def watch_leases(self) -> None: ...

    async def allocate_producer_ids(self) -> tuple[int, int]: ...

    async def allocate_producer_ids_for(self, broker_id: int, broker_epoch: int) -> tuple[int, int]: ...
