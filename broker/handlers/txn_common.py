"""What the transaction handlers share: the coordinator, and Kafka's answers for old clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.coordinator.metadata.image import TRANSACTION_VERSION
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.drivers.transactions import TransactionDriver
    from strom.broker.state import BrokerState

PRODUCER_FENCED_VERSION = {22: 4, 24: 2, 25: 2, 26: 2}
"""API key -> the first version that knows PRODUCER_FENCED (older ones get
INVALID_PRODUCER_EPOCH, which their clients handle the same way, as Kafka answers)."""


def txn_driver(broker: BrokerState) -> TransactionDriver | None:
    """The coordinator (started on first need), or None before the broker serves (answer
    COORDINATOR_NOT_AVAILABLE)."""
    return broker.transaction_coordinator()


def for_version(error: ErrorCode, api_key: int, version: int) -> ErrorCode:
    """`error` as a client of `version` understands it."""
    if error == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_VERSION[api_key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def transactions_v2(broker: BrokerState) -> bool:
    """`transaction.version` is finalized at 2 or more: transactions v2 (KIP-890 part 2)."""
    return broker.image.features.get(TRANSACTION_VERSION, 0) >= 2
