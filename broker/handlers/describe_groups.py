"""DescribeGroups (key 15).

Behavior:
- State, protocol type and members (client id, host as "/ip", group
  instance id) of each group. The chosen protocol and each member's
  metadata and assignment are filled in only while the group is Stable,
  as Kafka does.
- An unknown group is described as Dead with no members (v0-v5), or gets
  GROUP_ID_NOT_FOUND (v6, KIP-1043); an empty group id is INVALID_GROUP_ID.
- Authorized operations (v3+, when asked): READ, DESCRIBE and DELETE, as
  Kafka reports without an authorizer.

Version notes: v1 throttle time; v3 authorized operations; v4 group
instance id; v5 flexible; v6 error message and GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.authz import authorized
from strom.broker.handlers.group_common import group_driver, may_group
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6

Described = DescribeGroupsResponse.DescribedGroup
Member = DescribeGroupsResponse.DescribedGroupMember


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    version = request.api_version
    driver = group_driver(broker)
    groups = []
    for group_id in body.groups:
        if not may_group(broker, request, AclOperation.DESCRIBE, group_id):
            groups.append(_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        operations = authorized(body.include_authorized_operations, broker, request,
                                ResourceType.GROUP, group_id)  # fmt: skip
        if driver is None:
            groups.append(_error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, None))
            continue
        if not group_id:
            groups.append(_error(group_id, ErrorCode.INVALID_GROUP_ID, None))
            continue
        error = driver.coordinator_error(group_id)
        if error:
            groups.append(_error(group_id, error, None))
            continue
        summary = driver.machine.describe(group_id)
        if summary is None:
            if version >= 6:
                message = f"Group {group_id} not found."
                groups.append(_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message))
            else:
                groups.append(Described(group_id=group_id, group_state="Dead"))
            continue
        groups.append(
            Described(
                error_code=ErrorCode.NONE,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol_data,
                members=[
                    Member(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ],
                authorized_operations=operations,
            )
        )
    return DescribeGroupsResponse(groups=groups)


def _error(group_id: str, error: ErrorCode, message: str | None) -> Described:
    return Described(error_code=error, error_message=message, group_id=group_id)
