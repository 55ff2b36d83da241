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

from strom.broker.admin.deadline import before_deadline
from strom.broker.admin.forwarding import error_response, forward
from strom.wire.errors import ErrorCode
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

Response = ListPartitionReassignmentsResponse


async def handle(
    broker: BrokerState, request: RequestContext, body: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not broker.controller.is_active:
        return await forward(broker, request, body, Response)

    async def listed() -> ListPartitionReassignmentsResponse:
        return await broker.controller.list_partition_reassignments(body, request.api_version)

    response = await before_deadline(body.timeout_ms, listed)
    if response is None:
        return error_response(body, request.api_version, ErrorCode.REQUEST_TIMED_OUT, Response)
    return response
