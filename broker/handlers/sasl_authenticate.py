"""SaslAuthenticate (key 36) outside an authentication exchange.

Behavior:
- Within an exchange (after SaslHandshake v1 on a SASL listener) the connection's
  authenticator (`strom.broker.security.sasl`) answers it before requests reach the handlers.
- Reaching this handler means no exchange is under way (a listener without SASL, or an
  authenticated connection): ILLEGAL_SASL_STATE, as Kafka answers
  "SaslAuthenticate request received after successful authentication".

Version notes: v1 adds session_lifetime_ms (KIP-368); v2 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.wire.errors import ErrorCode
from strom.wire.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(
    broker: BrokerState, request: RequestContext, body: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )
