"""AlterPartitionReassignments (key 45).

Behavior:
- A thin layer over the controller (`Controller.alter_partition_reassignments`, see
  `strom.coordinator.controller.reassignment`): a target replica list starts moving a partition
  (adding/removing replicas as Kafka's KRaft controller tracks them; it completes when the ISR
  holds every adding replica, through the leader's AlterPartition); a null list cancels the
  reassignment in progress. Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION,
  INVALID_REPLICA_ASSIGNMENT (empty, duplicated or unregistered brokers; a cancel that would
  need an unclean election the topic does not allow), NO_REASSIGNMENT_IN_PROGRESS.
- `timeout_ms` is the controller deadline (see `strom.broker.admin.deadline`): past it every
  partition and the top level answer REQUEST_TIMED_OUT and nothing changes.
- On a broker that is not the active controller the request is forwarded to it
  (`strom.broker.admin.forwarding`).

Version notes: v0 only (what the wire layer decodes); v0 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward_or_run
from strom.wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    broker: BrokerState, request: RequestContext, body: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    return await forward_or_run(
        broker,
        request,
        body,
        AlterPartitionReassignmentsResponse,
        timeout_ms=body.timeout_ms,
        run=broker.controller.alter_partition_reassignments,
    )
