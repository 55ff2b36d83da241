"""LeaveGroup (key 13).

Behavior:
- Removes members at once (instead of waiting for their sessions to
  expire) and starts a rebalance for the rest. A member given only by group
  instance id (Admin's removeMembersFromConsumerGroup) is found by it; a
  member id that does not match the instance id's current member is
  FENCED_INSTANCE_ID. A member still in the KIP-394 round trip is simply
  forgotten.
- An unknown group: each member UNKNOWN_MEMBER_ID.

Version notes: v0-v2 one member id, errors at the top level; v3 batches
members with group instance ids and per-member errors; v4 flexible; v5
reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import group_driver, may_group
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(
    broker: BrokerState, request: RequestContext, body: LeaveGroupRequest
) -> LeaveGroupResponse:
    version = request.api_version
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    if not may_group(broker, request, AclOperation.READ, body.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = group_driver(broker)
    if driver is None:
        return LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    not_here = driver.coordinator_error(body.group_id)
    if not_here:
        return LeaveGroupResponse(error_code=not_here)
    error, results = driver.run_sync(
        lambda: driver.machine.leave(driver.now(), body.group_id, leaving)
    )
    if version < 3:
        first = next((e for e in results if e != ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(error_code=error or first)
    return LeaveGroupResponse(
        error_code=error,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=member_id, group_instance_id=instance, error_code=member_error
            )
            for (member_id, instance), member_error in zip(leaving, results, strict=False)
        ],
    )
