"""Producer ids for idempotent producers, handed out from controller-allocated blocks.

Like Kafka's RPCProducerIdManager: the controller hands this broker blocks of
ids (AllocateProducerIds, made durable in the metadata log before any id of
the block is used, so an id is never given out twice, even across restarts),
and ids are served from the current block. A block is fetched when the current
one runs out (one metadata write per 1000 ids), with a lock so concurrent
callers share one fetch: in-process when this node is the active controller,
otherwise as an AllocateProducerIds request to the active controller's
controller listener (through the forwarding client, which follows controller
changes). Kafka prefetches the next block at 90% use to hide that network hop;
Strom does not yet.

An unavailable controller is COORDINATOR_LOAD_IN_PROGRESS (retriable), as in Kafka.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from strom.broker.drivers.lifecycle import ControllerUnavailable
from strom.coordinator.controller.result import ControllerError
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore

log = logging.getLogger("strom.producer_ids")


class ProducerIdError(Exception):
    """No id could be allocated; `error` is what InitProducerId answers."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


class ProducerIdManager:
    """Serves producer ids; `await next_id()`."""

    def __init__(self, broker: BrokerCore) -> None:
        self._broker = broker
        self._next = 0
        self._end = 0
        self._lock = trio.Lock()

    async def next_id(self) -> int:
        if self._next >= self._end:
            async with self._lock:
                if self._next >= self._end:
                    start, length = await self._allocate()
                    self._next, self._end = start, start + length
        pid = self._next
        self._next += 1
        return pid

    async def _allocate(self) -> tuple[int, int]:
        try:
            if self._broker.controller.is_active:
                start, length = await self._broker.controller.allocate_producer_ids()
            else:
                start, length = await self._ask_active_controller()
        except ControllerError as exc:
            log.warning("producer id block allocation failed: %s", exc)
            # Kafka answers COORDINATOR_LOAD_IN_PROGRESS (retriable) while a block is
            # unavailable; only an exhausted id space is fatal.
            code = exc.error.code
            if code != ErrorCode.UNKNOWN_SERVER_ERROR:
                code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            raise ProducerIdError(code, str(exc)) from exc
        except trio.ClosedResourceError as exc:
            raise ProducerIdError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "shutting down") from exc
        log.info("allocated producer id block [%d, %d)", start, start + length)
        return start, length

    async def _ask_active_controller(self) -> tuple[int, int]:
        """AllocateProducerIds to the active controller; ControllerError for its refusal."""
        # the message classes load on first use, as the handlers' do (start-up stays lean)
        from strom.wire.messages.allocate_producer_ids import (
            AllocateProducerIdsRequest,
            AllocateProducerIdsResponse,
        )

        controller = self._broker.controller
        request = AllocateProducerIdsRequest(
            broker_id=self._broker.node_id, broker_epoch=controller.broker_epoch
        )
        timeout_ms = self._broker.config.controller_quorum_request_timeout_ms
        try:
            response = await self._broker.forwarder.forward(
                request, 0, AllocateProducerIdsResponse, timeout_ms
            )
        except ControllerUnavailable as exc:
            raise ControllerError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, str(exc)) from exc
        if response.error_code != ErrorCode.NONE:
            raise ControllerError(
                ErrorCode(response.error_code), "the active controller refused AllocateProducerIds"
            )
        return response.producer_id_start, response.producer_id_len
