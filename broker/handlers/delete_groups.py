"""DeleteGroups (key 42).

Behavior:
- Deletes groups without members: tombstones for every committed offset
  and for the group metadata go to `__consumer_offsets` in one batch, then
  the group is gone (ListGroups no longer shows it, OffsetFetch finds
  nothing).
- A group with members is NON_EMPTY_GROUP; an unknown one
  GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID.

Version notes: v1 no change; v2 flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import group_driver, may_group
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(
    broker: BrokerState, request: RequestContext, body: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(body.groups_names))
    refused = [n for n in names if not may_group(broker, request, AclOperation.DELETE, n)]
    names_ok = [n for n in names if n not in refused]
    driver = group_driver(broker)
    error = ErrorCode.COORDINATOR_NOT_AVAILABLE if driver is None else await driver.ensure_topic()
    if driver is None or error:
        results = dict.fromkeys(names_ok, error)
    else:
        results = await driver.delete_groups(names_ok) if names_ok else {}
    results.update(dict.fromkeys(refused, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    return DeleteGroupsResponse(
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=name, error_code=results[name])
            for name in names
        ]
    )
