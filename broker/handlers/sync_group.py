"""SyncGroup (key 14).

Behavior:
- The leader's request carries every member's assignment; it is written to
  `__consumer_offsets` with the group metadata, the group becomes Stable and
  every member's parked SyncGroup is answered with its own assignment.
  Followers' requests wait for the leader's (bounded by the rebalance
  timeout: members that never sync are removed and the group rebalances).
- A rebalance in progress is REBALANCE_IN_PROGRESS; an unknown member
  UNKNOWN_MEMBER_ID; a stale generation ILLEGAL_GENERATION; a protocol type
  or name that differs from the group's INCONSISTENT_GROUP_PROTOCOL.

Version notes: v1 throttle time; v3 group instance id; v4 flexible; v5
protocol type and name in request and response (KIP-559).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import group_driver, may_group
from strom.coordinator.groups.api import SyncRequest, SyncResult
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(
    broker: BrokerState, request: RequestContext, body: SyncGroupRequest
) -> SyncGroupResponse:
    if not may_group(broker, request, AclOperation.READ, body.group_id):
        return _response(SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    driver = group_driver(broker)
    if driver is None:
        return _response(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    req = SyncRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        generation=body.generation_id,
        assignments={a.member_id: bytes(a.assignment) for a in body.assignments},
        group_instance_id=body.group_instance_id,
        protocol_type=body.protocol_type,
        protocol_name=body.protocol_name,
    )
    return _response(await driver.sync(req))


def _response(result: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
