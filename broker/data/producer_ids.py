"""Producer ids for idempotent producers, handed out from controller-allocated blocks.

Like Kafka's RPCProducerIdManager: the controller hands this broker blocks of
ids (AllocateProducerIds, made durable in the metadata log before any id of
the block is used, so an id is never given out twice, even across restarts),
and ids are served from the current block. Kafka prefetches the next block at
90% use because its controller is a network hop away; here the controller is
in-process, so a block is fetched when the current one runs out (one metadata
fsync per 1000 ids), with a lock so concurrent callers share one fetch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from strom.coordinator.controller.result import ControllerError
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.state import BrokerState

log = logging.getLogger("strom.producer_ids")


class ProducerIdError(Exception):
    """No id could be allocated; `error` is what InitProducerId answers."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


class ProducerIdManager:
    """Serves producer ids; `await next_id()`."""

    def __init__(self, broker: BrokerState) -> None:
        self._broker = broker
        self._next = 0
        self._end = 0
        self._lock = trio.Lock()

    @classmethod
    def of(cls, broker: BrokerState) -> ProducerIdManager:
        return broker.service(cls, cls)

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
            start, length = await self._broker.controller.allocate_producer_ids()
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
