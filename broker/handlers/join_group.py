"""JoinGroup (key 11).

Behavior:
- The response is parked until the group's join phase ends (all members
  rejoined, the rebalance timeout passed, or `group.initial.rebalance.delay.ms`
  for a new group), then every joined member gets the generation, the chosen
  protocol and the leader; the leader also gets every member's metadata.
- Protocol selection: each member votes for its most preferred protocol
  among those all members support; a member whose protocol type or
  protocols do not fit the group gets INCONSISTENT_GROUP_PROTOCOL.
- Session timeouts outside `group.min/max.session.timeout.ms` are
  INVALID_SESSION_TIMEOUT; a full group (`group.max.size`) is
  GROUP_MAX_SIZE_REACHED. Any protocol type works (consumer, connect, ...).
- Static members (`group_instance_id`, v5+) skip the member-id round trip; a
  known instance with a new member id takes over the old member's place
  (fencing the old one with FENCED_INSTANCE_ID) without a rebalance when
  the group is stable.

Version notes: v4+ new dynamic members first get MEMBER_ID_REQUIRED with
their id (KIP-394); v5 group instance id; v6 flexible; v7 protocol type in the
response, protocol name nullable; v8 reason; v9 skip_assignment for a
rejoining static leader (KIP-814). v0-v1 are gone in Kafka 4.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import client_host, group_driver, may_group
from strom.coordinator.groups.api import JoinRequest, JoinResult
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.join_group import JoinGroupRequest, JoinGroupResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 11
MIN_VERSION = 2
MAX_VERSION = 9


async def handle(
    broker: BrokerState, request: RequestContext, body: JoinGroupRequest
) -> JoinGroupResponse:
    version = request.api_version
    if not may_group(broker, request, AclOperation.READ, body.group_id):
        return _response(JoinResult(ErrorCode.GROUP_AUTHORIZATION_FAILED), version)
    driver = group_driver(broker)
    if driver is None:
        return _response(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE), version)
    rebalance = body.rebalance_timeout_ms
    req = JoinRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=rebalance if rebalance >= 0 else body.session_timeout_ms,
        group_instance_id=body.group_instance_id,
        client_id=request.client_id or "",
        client_host=client_host(request),
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    return _response(await driver.join(req), version)


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment and version >= 9,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )
