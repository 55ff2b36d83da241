"""An internal topic as a coordinator's driver needs it (`__consumer_offsets`,
`__transaction_state`): which partitions exist, the log of those this node leads, appending
to them with acks=all, and creating the topic on first use.

The drivers depend on this protocol only, so their tests run over real logs without a
broker; the broker's implementation is `strom.broker.data.coordinator_topics`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from strom.storage import PartitionLog
from strom.wire.errors import ErrorCode

Replicated = Callable[[], Awaitable[ErrorCode]]
"""Waits until a written batch is committed (the high watermark passed it): NONE, or why not
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT)."""


class CoordinatorTopic(Protocol):
    def partitions(self) -> list[int] | None:
        """The topic's partition ids; None before it exists."""
        ...

    def leader(self, partition: int) -> tuple[PartitionLog, int] | None:
        """The partition's log and leader epoch while this node leads it; None otherwise."""
        ...

    def append(
        self, partition: int, batch: bytes | bytearray, now: int, timeout_ms: int | None = None
    ) -> ErrorCode | Replicated:
        """Append one batch as the coordinator, acks=all: an error if nothing was written
        (e.g. NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS), NONE if the records are committed
        already (one replica), else the wait for the ISR to hold them (bounded by
        `timeout_ms`, or the topic's own commit timeout)."""
        ...

    async def create(self) -> ErrorCode:
        """Create the topic (as Kafka does, on first use); NONE once it exists."""
        ...
