"""DescribeTransactions (key 65).

Behavior:
- For each transactional id this broker coordinates: its state (Kafka's names: Empty,
  Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), producer id and
  epoch, transaction timeout, the start of the open transaction (-1 when none has been
  open) and the partitions in it. `kafka-transactions.sh describe` reads it.
- DESCRIBE on the id is needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the partitions of
  topics the principal may not DESCRIBE are left out, as Kafka does.
- Per id: NOT_COORDINATOR (another broker coordinates it; the admin client asks
  FindCoordinator), COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND (unknown or
  expiring), INVALID_REQUEST (an empty id), COORDINATOR_NOT_AVAILABLE before the
  coordinator runs.

Version notes: only v0 (flexible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.txn_common import txn_driver
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.coordinator.transactions.txn_api import DescribedTxn
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0

State = DescribeTransactionsResponse.TransactionState
TopicData = DescribeTransactionsResponse.TopicData


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    driver = txn_driver(broker)
    states = []
    for transactional_id in body.transactional_ids:
        if not allowed(
            broker, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            described = DescribedTxn(transactional_id, error)
        elif driver is None:
            described = DescribedTxn(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        else:
            described = driver.describe(transactional_id)
        visible = [
            tp
            for tp in described.partitions
            if allowed(broker, request, AclOperation.DESCRIBE, ResourceType.TOPIC, tp[0])
        ]
        states.append(_state(described, visible))
    return DescribeTransactionsResponse(transaction_states=states)


def _state(
    d: DescribedTxn, partitions: list[tuple[str, int]]
) -> DescribeTransactionsResponse.TransactionState:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return State(
        error_code=d.error,
        transactional_id=d.transactional_id,
        transaction_state=d.state,
        transaction_timeout_ms=d.timeout_ms,
        transaction_start_time_ms=d.start_ms,
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        topics=[TopicData(topic, parts) for topic, parts in topics.items()],
    )
