"""The controller: a pure state machine (`controller`) and its trio driver (`driver`).

`Controller` turns admin requests into metadata records and responses with
Kafka's semantics and error codes; `ControllerDriver` serializes commands,
makes their records durable in the metadata log, applies them and publishes
the new `MetadataImage`. `brokers` holds the broker life cycle (registration,
heartbeats, leases, fencing, controlled shutdown; docs/cluster.md). See docs/metadata.md.
"""

from strom.coordinator.controller.result import ApiError, ControllerError, ControllerResult
from strom.coordinator.controller.state_machine import (
    LATEST_METADATA_VERSION,
    MIN_METADATA_VERSION,
    PRODUCER_ID_BLOCK_SIZE,
    Controller,
)

__all__ = [
    "LATEST_METADATA_VERSION",
    "MIN_METADATA_VERSION",
    "PRODUCER_ID_BLOCK_SIZE",
    "ApiError",
    "Controller",
    "ControllerError",
    "ControllerResult",
]
