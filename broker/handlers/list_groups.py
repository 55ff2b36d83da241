"""ListGroups (key 16).

Behavior:
- Every group this coordinator knows (consumer groups, Connect groups,
  groups that only store offsets), with its protocol type ("" for groups
  that only committed offsets). Deleted groups are gone.
- Filters (case-insensitive, empty means all): states (v4+, Kafka's state
  names) and types (v5+; every group here is "classic").

Version notes: v1 throttle time; v3 flexible; v4 states filter and group
state; v5 types filter and group type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import group_driver, may_group
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.list_groups import ListGroupsRequest, ListGroupsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(
    broker: BrokerState, request: RequestContext, body: ListGroupsRequest
) -> ListGroupsResponse:
    driver = group_driver(broker)
    if driver is None:
        return ListGroupsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    states = list(body.states_filter)
    types = list(body.types_filter)
    # DESCRIBE on the cluster lists every group; otherwise those it may DESCRIBE (Kafka's)
    everything = allowed(broker, request, AclOperation.DESCRIBE, ResourceType.CLUSTER)
    return ListGroupsResponse(
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in driver.machine.list_groups(states, types)
            if everything or may_group(broker, request, AclOperation.DESCRIBE, g.group_id)
        ]
    )
