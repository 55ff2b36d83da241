"""The controller: a pure state machine (`state_machine`).

`Controller` turns admin requests into metadata records and responses with
Kafka's semantics and error codes; its trio host (`strom.broker.drivers.quorum_controller`)
serializes commands, commits their records to the Raft-replicated metadata log, applies them
and publishes the new `MetadataImage`. `brokers` holds the broker life cycle (registration,
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
