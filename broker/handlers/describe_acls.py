"""DescribeAcls (key 29).

Behavior:
- DESCRIBE on the cluster is needed (else CLUSTER_AUTHORIZATION_FAILED); without an authorizer
  SECURITY_DISABLED "No Authorizer is configured on the broker".
- Answered from this broker's metadata image: the ACLs the filter matches (ANY types, null
  names, principals and hosts match all; MATCH: every ACL that applies to the named resource),
  grouped by resource pattern. A filter with an UNKNOWN type is INVALID_REQUEST.

Version notes: v1 adds pattern types; v2 is flexible; v3 is v2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.security.authorization import allowed
from strom.coordinator.controller.acl_commands import invalid_filter
from strom.coordinator.metadata.acls import AclFilter, AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeAclsRequest
) -> DescribeAclsResponse:
    if broker.authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker")  # fmt: skip
    if not allowed(broker, request, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = AclFilter(body.resource_type_filter, body.resource_name_filter,
                       body.pattern_type_filter, body.principal_filter, body.host_filter,
                       body.operation, body.permission_type)  # fmt: skip
    reason = invalid_filter(wanted)
    if reason is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=reason)
    resources: dict[tuple[int, str, int], list[DescribeAclsResponse.AclDescription]] = {}
    for acl in broker.image.acls.values():
        if wanted.matches(acl):
            resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                DescribeAclsResponse.AclDescription(acl.principal, acl.host, acl.operation,
                                                    acl.permission)
            )
    return DescribeAclsResponse(
        resources=[
            DescribeAclsResponse.DescribeAclsResource(
                rtype, name, pattern,
                sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission_type)),
            )
            for (rtype, name, pattern), acls in sorted(resources.items())
        ]
    )
