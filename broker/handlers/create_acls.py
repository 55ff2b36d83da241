"""CreateAcls (key 30).

Behavior:
- ALTER on the cluster is needed (else every creation CLUSTER_AUTHORIZATION_FAILED); without
  an authorizer every creation is SECURITY_DISABLED, as Kafka answers.
- The controller checks each binding (INVALID_REQUEST with the reason: resource and pattern
  types, operation valid for the resource type, principal `Type:name`, a CLUSTER resource
  named kafka-cluster) and writes one AccessControlEntryRecord per new ACL (an identical ACL is
  not written twice) (`strom.coordinator.controller.acl_commands`). The ACLs apply on every
  broker as soon as its image has the record.
- On a broker that is not the active controller the request goes to the active controller.

Version notes: v1 adds pattern types (KIP-290); v2 is flexible; v3 is v2 (KIP-1035).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.create_acls import CreateAclsRequest, CreateAclsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3

Result = CreateAclsResponse.AclCreationResult


async def handle(
    broker: BrokerState, request: RequestContext, body: CreateAclsRequest
) -> CreateAclsResponse:
    if broker.authorizer is None:
        message = "No Authorizer is configured on the broker"
        return CreateAclsResponse(
            results=[Result(ErrorCode.SECURITY_DISABLED, message) for _ in body.creations]
        )
    if not allowed(broker, request, AclOperation.ALTER, ResourceType.CLUSTER):
        return CreateAclsResponse(
            results=[Result(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for _ in body.creations]
        )
    if not broker.controller.is_active:
        return await forward(broker, request, body, CreateAclsResponse)
    return await broker.controller.create_acls(body, request.api_version)
