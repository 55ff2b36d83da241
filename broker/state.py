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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.config.listeners import Listener
    from broker.log.manager import LogManager
    from coordinator.controller.driver import ControllerDriver
    from coordinator.metadata.image import MetadataImage


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class BrokerState:
    config: BrokerConfig
    node_id: int
    cluster_id: str
    endpoints: list[Listener]
    """Advertised endpoints, with the real ports once listeners are bound."""
    controller: ControllerDriver
    logs: LogManager
    clock: Callable[[], int] = field(default=wall_clock_ms)

    @property
    def image(self) -> MetadataImage:
        """The latest metadata image the controller has published."""
        return self.controller.image
