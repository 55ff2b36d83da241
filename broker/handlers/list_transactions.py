"""ListTransactions (key 66).

Behavior:
- The transactions of the transactional ids this broker coordinates (`kafka-transactions.sh
  list` asks every broker): transactional id, producer id and state. Filters: states by
  Kafka's names (names of no state are echoed in `unknown_state_filters` and match
  nothing), producer ids, and (v1) a duration, which keeps transactions open for longer
  than it (from their start; a negative duration is no filter). An expiring id is never
  listed, nor one the principal may not DESCRIBE.
- COORDINATOR_LOAD_IN_PROGRESS while a `__transaction_state` partition this broker leads is
  loading, COORDINATOR_NOT_AVAILABLE before the coordinator runs.

Version notes: v0 flexible; v1 adds the duration filter (KIP-994).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.txn_common import txn_driver
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: ListTransactionsRequest
) -> ListTransactionsResponse:
    driver = txn_driver(broker)
    if driver is None:
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    listing = driver.list_transactions(
        list(body.state_filters), list(body.producer_id_filters), body.duration_filter
    )
    return ListTransactionsResponse(
        error_code=listing.error,
        unknown_state_filters=listing.unknown_state_filters,
        transaction_states=[
            ListTransactionsResponse.TransactionState(t.transactional_id, t.producer_id, t.state)
            for t in listing.transactions
            if allowed(
                broker, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                t.transactional_id,
            )
        ],
    )
