"""SaslHandshake (key 17) after authentication, or on a listener without SASL.

Behavior:
- On a SASL listener the handshake that starts (or, with connections.max.reauth.ms,
  restarts) authentication is answered by the connection's authenticator
  (`strom.broker.security.sasl`) before requests reach the handlers.
- A handshake that reaches this handler is one no authenticator expects (a PLAINTEXT or SSL
  listener, or a SASL connection already authenticated without re-authentication):
  ILLEGAL_SASL_STATE, with no mechanisms, as Kafka answers it.

Version notes: v0 (raw SASL tokens follow) and v1 (SaslAuthenticate follows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.wire.errors import ErrorCode
from strom.wire.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
