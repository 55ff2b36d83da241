"""BrokerHeartbeat (key 63): a registered broker renews its lease (a controller API).

Behavior:
- Answered only on a controller listener (`controller.listener.names`); on a client listener
  the connection closes, as Kafka's SocketServer does for an API the listener does not enable.
- The controller (`strom.coordinator.controller.brokers`) renews the lease
  (`broker.session.timeout.ms`) and answers `is_caught_up` (the broker's metadata offset has
  reached its registration record), `is_fenced` (unfenced once caught up, unless `want_fence`)
  and `should_shut_down` (after `want_shut_down`, once the broker leads no partition).
  An epoch other than the broker's registration is STALE_BROKER_EPOCH.

Version notes: v0 flexible (KIP-631); v1 adds OfflineLogDirs (accepted, not used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 63
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: BrokerHeartbeatRequest
) -> BrokerHeartbeatResponse:
    return await broker.controller.broker_heartbeat(body)
