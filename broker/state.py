"""Everything a request handler may touch, in one place.

The broker reads cluster metadata from `image` (built from the metadata log)
and asks `controller` for every change: only the controller appends metadata
records. Partition data lives in `logs`. Handlers get this object and the
request; they never reach for globals.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from strom.broker.drivers.groups import GroupDriver
    from strom.broker.drivers.quorum_controller import QuorumController
    from strom.broker.drivers.raft import RaftDriver
    from strom.broker.drivers.topics import TopicController
    from strom.config import BrokerConfig
    from strom.config.listeners import Listener
    from strom.coordinator.controller.liveness import OfflineReplicas
    from strom.coordinator.metadata.image import MetadataImage
    from strom.storage.log.log_manager import LogManager


S = TypeVar("S")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class BrokerState:
    config: BrokerConfig
    node_id: int
    cluster_id: str
    endpoints: list[Listener]
    """Advertised endpoints, with the real ports once listeners are bound."""
    controller: QuorumController
    """The controller: this node's member of the metadata quorum (a one-voter quorum on a
    single node)."""
    logs: LogManager
    clock: Callable[[], int] = field(default=wall_clock_ms)
    groups: GroupDriver | None = None
    """The group coordinator (set by the broker once it has loaded __consumer_offsets)."""
    raft: RaftDriver | None = None
    """The Raft replica of the metadata log (`controller.raft`; None only in handler tests)."""
    topic_creator: TopicController | None = None
    """Where the broker's own CreateTopics go (auto-creation, internal topics): the active
    controller, forwarded when it runs elsewhere (set by the broker process). None: `controller`."""
    _services: dict[Any, Any] = field(default_factory=dict, repr=False, init=False)

    def service(self, kind: type[S], make: Callable[[BrokerState], S]) -> S:
        """This broker's one `kind` helper (fetch sessions, producer ids...), made on first use.

        Keeps per-broker state of handler helpers out of module globals, so two
        brokers in one process (tests) never share it.
        """
        found = self._services.get(kind)
        if found is None:
            found = self._services[kind] = make(self)
        assert isinstance(found, kind)
        return found

    @property
    def topics(self) -> TopicController:
        """The controller the broker's own topic creations go to (see `topic_creator`)."""
        return self.topic_creator if self.topic_creator is not None else self.controller

    @property
    def image(self) -> MetadataImage:
        """The latest metadata image the controller has published."""
        return self.controller.image

    @property
    def offline_replicas(self) -> OfflineReplicas:
        """Replicas their brokers reported unable to serve (controller liveness state)."""
        return self.controller.offline_replicas
