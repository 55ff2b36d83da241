"""AllocateProducerIds (key 67): a broker asks the active controller for a block of producer ids.

Behavior:
- Answered only on a controller listener (`controller.listener.names`), as in Kafka: brokers
  whose node is not the active controller send it there (strom.broker.data.producer_ids); a
  broker on the active controller's own node takes its blocks in-process.
- The controller appends a ProducerIdsRecord before answering, so a block is durable in the
  metadata log before any id of it is handed out, and no two blocks overlap, across restarts
  and controller failover alike.
- Errors, in the response's error code: NOT_CONTROLLER on a controller that is not active (the
  broker retries on the active one), STALE_BROKER_EPOCH for a broker not registered with that
  epoch, UNKNOWN_SERVER_ERROR once the id space is exhausted, KAFKA_STORAGE_ERROR when the
  metadata log cannot be written.

Version notes: v0 only (KIP-730), flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.coordinator.controller.result import ControllerError
from strom.wire.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 67
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    broker: BrokerState, request: RequestContext, body: AllocateProducerIdsRequest
) -> AllocateProducerIdsResponse:
    try:
        start, length = await broker.controller.allocate_producer_ids_for(
            body.broker_id, body.broker_epoch
        )
    except ControllerError as exc:
        return AllocateProducerIdsResponse(error_code=exc.error.code)
    return AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=length)
