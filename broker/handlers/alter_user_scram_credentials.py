"""AlterUserScramCredentials (key 51): add, change or delete users' SCRAM credentials.

Behavior:
- The controller checks each alteration and writes UserScramCredentialRecord /
  RemoveUserScramCredentialRecord into the metadata log (`strom.coordinator.controller.scram`):
  per user, UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL (iterations outside
  4096-16384, empty name or salt), DUPLICATE_RESOURCE (a user and mechanism twice),
  RESOURCE_NOT_FOUND (deleting what is not there); a user with any failure gets nothing.
- The stored credential is StoredKey and ServerKey (RFC 5802), never the password or the
  salted password; SCRAM listeners authenticate against it as soon as the record is applied.
- On a broker that is not the active controller the request goes to the active controller
  (`strom.broker.admin.forwarding`).

Version notes: v0 only (flexible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    broker: BrokerState, request: RequestContext, body: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    if not allowed(broker, request, AclOperation.ALTER, ResourceType.CLUSTER):
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
        return AlterUserScramCredentialsResponse(
            results=[result(u, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for u in users]
        )
    if not broker.controller.is_active:
        return await forward(broker, request, body, AlterUserScramCredentialsResponse)
    return await broker.controller.alter_user_scram_credentials(body, request.api_version)
