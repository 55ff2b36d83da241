"""Heartbeat (key 12).

Behavior:
- Keeps a member's session alive. While the group prepares a rebalance the
  answer is REBALANCE_IN_PROGRESS, which tells the member to rejoin; after
  the join phase (CompletingRebalance, Stable) it is NONE.
- Unknown member: UNKNOWN_MEMBER_ID; another member now holds the group
  instance id: FENCED_INSTANCE_ID; stale generation: ILLEGAL_GENERATION.

Version notes: v1 throttle time; v3 group instance id; v4 flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import group_driver, may_group
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(
    broker: BrokerState, request: RequestContext, body: HeartbeatRequest
) -> HeartbeatResponse:
    if not may_group(broker, request, AclOperation.READ, body.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = group_driver(broker)
    if driver is None:
        return HeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    instance = body.group_instance_id if request.api_version >= 3 else None
    error = driver.coordinator_error(body.group_id) or driver.run_sync(
        lambda: driver.machine.heartbeat(
            driver.now(), body.group_id, body.member_id, body.generation_id, instance
        )
    )
    return HeartbeatResponse(error_code=error)
