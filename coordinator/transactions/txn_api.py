"""What the transaction coordinator takes and gives: settings, results, writes, marker sends.

Handlers translate between these and the wire messages of each version; the driver
(`strom.broker.drivers.transactions`) appends the writes, sends the markers and reports back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.coordinator.transactions.txn_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
)
from strom.wire.errors import ErrorCode

KeyValue = tuple[bytes, bytes | None]


@dataclass(frozen=True)
class TxnConfig:
    """The coordinator's settings (Kafka's defaults)."""

    num_partitions: int = 50
    """transaction.state.log.num.partitions"""
    max_timeout_ms: int = 900_000
    """transaction.max.timeout.ms"""
    id_expiration_ms: int = 604_800_000
    """transactional.id.expiration.ms"""
    retry_backoff_ms: int = 100
    """How soon a failed completion write or marker is tried again."""


@dataclass(frozen=True)
class InitResult:
    """InitProducerId: the producer id and epoch to use, or the error (with -1 / -1)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class EndResult:
    """EndTxn: the error and, for transactions v2 (EndTxn v5), the id and epoch to use next."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class NeedProducerId:
    """The call needs a fresh producer id: obtain one and call again with it."""


NEED_PRODUCER_ID = NeedProducerId()

Released = InitResult | EndResult | ErrorCode
Reply = tuple[int, Released]
"""A parked response released by the state machine: (waiter token, result)."""


@dataclass(frozen=True)
class TxnWrite:
    """One record to append to `__transaction_state` partition `partition` (acks=all); report
    its outcome with `write_completed(now, token, error)`. Writes complete in the order emitted
    per partition."""

    token: int
    partition: int
    record: KeyValue
    timeout_ms: int
    """How long the append may wait for the ISR (the transaction's timeout, as Kafka)."""


@dataclass(frozen=True)
class MarkerSend:
    """Write a COMMIT or ABORT marker of producer `producer_id` at `producer_epoch` into each
    partition (through its leader's WriteTxnMarkers); report per partition with
    `markers_written`."""

    transactional_id: str
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class DescribedTxn:
    """DescribeTransactions for one transactional id."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 0
    start_ms: int = -1
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True)
class ListedTxn:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TxnListing:
    """ListTransactions: an error, or the matching transactions and the state filters
    that name no state."""

    error: ErrorCode
    transactions: list[ListedTxn] = field(default_factory=list)
    unknown_state_filters: list[str] = field(default_factory=list)
