"""BrokerRegistration (key 62): a broker joins the cluster (a controller API).

Behavior:
- Answered only on a controller listener (`controller.listener.names`); on a client listener
  the connection closes, as Kafka's SocketServer does for an API the listener does not enable.
- The controller (`strom.coordinator.controller.brokers`) writes a fenced RegisterBrokerRecord
  whose offset is the broker's epoch (the response's `broker_epoch`); the broker is unfenced
  by a later heartbeat. Errors, without a message field on the wire: INCONSISTENT_CLUSTER_ID
  (another cluster id), DUPLICATE_BROKER_REGISTRATION (another incarnation of that id is
  unfenced and still holds a lease, unless it names the same log directories and stopped
  heartbeating), UNSUPPORTED_VERSION (the broker cannot run the finalized metadata.version),
  BROKER_ID_NOT_REGISTERED (a ZooKeeper-migrating broker).

Version notes: v0 flexible (KIP-631); v1 adds IsMigratingZkBroker; v2 LogDirs (Strom's
brokers send their `directory.id`s: a restart on the same directories replaces the previous
incarnation once that one stopped heartbeating, without waiting out its lease); v3
PreviousBrokerEpoch (KIP-966: Strom's brokers send the epoch their clean-shutdown markers
name; with eligible leader replicas enabled a mismatch is an unclean shutdown that takes the
broker out of every ISR and ELR, see coordinator/controller/brokers.py); v4 the same with
kraft.version features.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.coordinator.controller.result import ControllerError
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 62
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(
    broker: BrokerState, request: RequestContext, body: BrokerRegistrationRequest
) -> BrokerRegistrationResponse:
    try:
        return await broker.controller.broker_registration(body)
    except ControllerError as exc:
        return BrokerRegistrationResponse(error_code=exc.error.code)
