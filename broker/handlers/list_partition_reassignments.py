"""ListPartitionReassignments (key 46).

Behavior:
- Answered by the active controller from its image (`Controller.list_partition_reassignments`):
  every partition with adding or removing replicas (null topics), or those among the named
  topics and partitions; unknown topics and partitions are left out, as in Kafka. Each entry
  shows the replica set (target followed by the replicas being removed), adding and removing.
- `timeout_ms` is the controller deadline, as for the other controller APIs: past it the top
  level answers REQUEST_TIMED_OUT.
- On a broker that is not the active controller the request is forwarded to it
  (`strom.broker.admin.forwarding`), as Kafka's brokers do.

Version notes: v0 only (what the wire layer decodes); v0 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward_or_run
from strom.wire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    broker: BrokerState, request: RequestContext, body: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    return await forward_or_run(
        broker,
        request,
        body,
        ListPartitionReassignmentsResponse,
        timeout_ms=body.timeout_ms,
        run=broker.controller.list_partition_reassignments,
    )
