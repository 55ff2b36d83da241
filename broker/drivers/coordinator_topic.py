"""An internal topic as a coordinator's driver needs it (`__consumer_offsets`,
`__transaction_state`): which partitions exist, the log of those this node leads, appending
to them with acks=all, creating the topic on first use, and reading a partition back.

The drivers depend on this protocol only, so their tests run over real logs without a
broker; the broker's implementation is `strom.broker.data.coordinator_topics`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from strom.storage import OffsetOutOfRange, PartitionLog
from strom.storage.log.producer_state import VerificationGuard
from strom.wire.errors import ErrorCode
from strom.wire.records import BatchHeader, Record, decode_batch, iter_batches

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
        self,
        partition: int,
        batch: bytes | bytearray,
        now: int,
        timeout_ms: int | None = None,
        *,
        verification: VerificationGuard | None = None,
    ) -> ErrorCode | Replicated:
        """Append one batch as the coordinator, acks=all: an error if nothing was written
        (e.g. NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS), NONE if the records are committed
        already (one replica, nothing to fsync), else the wait for the ISR to hold them
        (bounded by `timeout_ms`, or the topic's own commit timeout), after the fsync
        `flush.messages` asks for. `verification`: the guard a
        transactional batch was verified under (KIP-890; `PartitionLog.append`)."""
        ...

    async def create(self) -> ErrorCode:
        """Create the topic (as Kafka does, on first use); NONE once it exists."""
        ...


def read_batches(
    partition_log: PartitionLog, read_bytes: int
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every batch of a partition from its log start, in `read_bytes` reads (Kafka's
    `*.load.buffer.size`), decoded: what a coordinator replays when it becomes the leader
    (blocking: run it in a worker thread)."""
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        try:
            data = partition_log.read(offset, read_bytes).read_bytes()
        except OffsetOutOfRange:
            return
        if not data:
            return
        for header, view in iter_batches(data):
            offset = header.next_offset
            yield header, decode_batch(view, header)[1]
