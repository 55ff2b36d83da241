"""What this node is and holds: identity, configuration, the controller's metadata, the logs.

`BrokerCore` is what the data path (`strom.broker.data`), replication and the broker's admin
helpers build on; the handlers get `BrokerState` (`strom.broker.state`), which adds the
services built on top of it at start-up. The broker reads cluster metadata from `image`
(built from the metadata log) and asks `controller` for every change: only the controller
appends metadata records. Partition data lives in `logs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from strom.broker.metrics.recorder import BrokerMetrics
from strom.broker.runtime import wall_clock_ms

__all__ = ["BrokerCore", "wall_clock_ms"]

if TYPE_CHECKING:
    from strom.broker.drivers.controller_forwarder import ControllerForwarder
    from strom.broker.drivers.groups import GroupDriver
    from strom.broker.drivers.quorum_controller import QuorumController
    from strom.broker.drivers.raft import RaftDriver
    from strom.broker.drivers.topics import TopicController
    from strom.broker.drivers.transactions import TransactionDriver
    from strom.config import BrokerConfig
    from strom.config.listeners import Listener
    from strom.coordinator.controller.liveness import OfflineReplicas
    from strom.coordinator.metadata.image import MetadataImage
    from strom.storage.log.log_manager import LogManager


class CoordinatorStarter(Protocol):
    """Starts the coordinators on first need (`strom.broker.data.coordinator_start`)."""

    def groups(self) -> GroupDriver | None: ...

    def transactions(self) -> TransactionDriver | None: ...

    def follow(self) -> None: ...


@dataclass
class BrokerCore:
    config: BrokerConfig
    node_id: int
    cluster_id: str
    endpoints: list[Listener]
    """Advertised endpoints, with the real ports once listeners are bound."""
    controller: QuorumController
    """The controller: this node's member of the metadata quorum (a one-voter quorum on a
    single node)."""
    logs: LogManager
    forwarder: ControllerForwarder
    """Sends admin requests to the active controller when it runs elsewhere
    (`strom.broker.admin.forwarding`)."""
    clock: Callable[[], int] = field(default=wall_clock_ms)
    groups: GroupDriver | None = None
    """The group coordinator, once started (`group_coordinator` starts it)."""
    transactions: TransactionDriver | None = None
    """The transaction coordinator, once started (`transaction_coordinator` starts it)."""
    coordinators: CoordinatorStarter | None = None
    """Starts the coordinators on first need, once the broker serves (None before)."""
    raft: RaftDriver | None = None
    """The Raft replica of the metadata log (`controller.raft`; None only in handler tests)."""
    topic_creator: TopicController | None = None
    """Where the broker's own CreateTopics go (auto-creation, internal topics): the active
    controller, forwarded when it runs elsewhere (set by the broker process). None: `controller`."""
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    """This broker's request counters (`strom.broker.metrics`)."""
    followed: bool = False
    """An image was followed (`strom.broker.replication.partitions.follow_image`): until then
    this broker leads nothing (a quorum member follows only once caught up with the metadata
    log, see `strom.broker.process.app`)."""
    _effective: tuple[object, BrokerConfig] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def group_coordinator(self) -> GroupDriver | None:
        """The group coordinator, started if this is its first need; None before the broker
        serves."""
        if self.groups is None and self.coordinators is not None:
            return self.coordinators.groups()
        return self.groups

    def transaction_coordinator(self) -> TransactionDriver | None:
        """The transaction coordinator, started if this is its first need; None before the
        broker serves."""
        if self.transactions is None and self.coordinators is not None:
            return self.coordinators.transactions()
        return self.transactions

    @property
    def topics(self) -> TopicController:
        """The controller the broker's own topic creations go to (see `topic_creator`)."""
        return self.topic_creator if self.topic_creator is not None else self.controller

    @property
    def effective_config(self) -> BrokerConfig:
        """`config` with the dynamic broker configs stored in the metadata image (this node's,
        then the cluster default), as of the latest image: what a setting Kafka lets
        kafka-configs change at runtime is read from."""
        controller: QuorumController | None = self.controller
        if controller is None:  # a voter serving Raft before its controller runs (tests)
            return self.config
        image = controller.image
        cached = self._effective
        if cached is None or cached[0] is not image:
            cached = self._effective = (image, image.broker_config_layers(self.config).effective())
        return cached[1]

    @property
    def image(self) -> MetadataImage:
        """The latest metadata image the controller has published."""
        return self.controller.image

    @property
    def offline_replicas(self) -> OfflineReplicas:
        """Replicas their brokers reported unable to serve (controller liveness state)."""
        return self.controller.offline_replicas
