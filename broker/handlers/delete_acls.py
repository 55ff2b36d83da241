"""DeleteAcls (key 31).

Behavior:
- ALTER on the cluster is needed (else every filter CLUSTER_AUTHORIZATION_FAILED); without an
  authorizer every filter is SECURITY_DISABLED.
- Each filter removes the ACLs it matches (ANY types, null names, principals and hosts match
  all; pattern type MATCH: every ACL that applies to the named resource) and lists them; the
  controller writes a RemoveAccessControlEntryRecord per ACL
  (`strom.coordinator.controller.acl_commands`).
- On a broker that is not the active controller the request goes to the active controller.

Version notes: v1 adds pattern types; v2 is flexible; v3 is v2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3

Result = DeleteAclsResponse.DeleteAclsFilterResult


async def handle(
    broker: BrokerState, request: RequestContext, body: DeleteAclsRequest
) -> DeleteAclsResponse:
    if broker.authorizer is None:
        message = "No Authorizer is configured on the broker"
        return DeleteAclsResponse(
            filter_results=[Result(ErrorCode.SECURITY_DISABLED, message, []) for _ in body.filters]
        )
    if not allowed(broker, request, AclOperation.ALTER, ResourceType.CLUSTER):
        return DeleteAclsResponse(
            filter_results=[
                Result(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, []) for _ in body.filters
            ]
        )
    if not broker.controller.is_active:
        return await forward(broker, request, body, DeleteAclsResponse)
    return await broker.controller.delete_acls(body, request.api_version)
