"""ListTransactions (key 66).

Behavior:
- The transactions of the transactional ids this broker coordinates (`kafka-transactions.sh
  list` asks every broker): transactional id, producer id and state. Filters: states by
  Kafka's names (names of no state are echoed in `unknown_state_filters` and match
  nothing), producer ids, and (v1) a duration, which keeps transactions open for longer
  than it (from their start; a negative duration is no filter), and (v2) a transactional id
  pattern, which keeps the ids it matches whole. An expiring id is never listed, nor one the
  principal may not DESCRIBE.
- The pattern is a regular expression in Kafka's dialect: Kafka compiles it with RE2/J, so
  Strom compiles it with RE2 (same syntax: no backreferences, no lookaround). Null or empty
  is no filter. One that does not compile is INVALID_REGULAR_EXPRESSION for the whole
  request (the response has no message field; the broker logs why).
- COORDINATOR_LOAD_IN_PROGRESS while a `__transaction_state` partition this broker leads is
  loading, COORDINATOR_NOT_AVAILABLE before the coordinator runs; both are answered before
  the pattern is judged, as Kafka does.

Version notes: v0 flexible; v1 adds the duration filter (KIP-994); v2 the transactional id
pattern (KIP-1152).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import re2

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
MAX_VERSION = 2

log = logging.getLogger(__name__)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged by RE2


class InvalidPattern(Exception):
    pass


def id_matcher(pattern: str | None) -> Callable[[str], bool] | None:
    """The filter a v2 pattern stands for (None: no filter); InvalidPattern when RE2 refuses
    it. Kafka matches the whole id (Matcher.matches)."""
    if not pattern:
        return None
    try:
        compiled = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else e
        raise InvalidPattern(
            f"Transaction ID pattern `{pattern}` is not a valid regular expression: {reason}."
        ) from None
    return lambda transactional_id: compiled.fullmatch(transactional_id) is not None


async def handle(
    broker: BrokerState, request: RequestContext, body: ListTransactionsRequest
) -> ListTransactionsResponse:
    driver = txn_driver(broker)
    if driver is None:
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        id_matches = id_matcher(body.transactional_id_pattern)
    except InvalidPattern as e:
        # Kafka judges the pattern after the loading check: ask for nothing to learn that
        listing = driver.list_transactions([], [], -1, lambda _: False)
        if listing.error:
            return ListTransactionsResponse(error_code=listing.error)
        log.info("ListTransactions refused: %s", e)
        return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
    listing = driver.list_transactions(
        list(body.state_filters), list(body.producer_id_filters), body.duration_filter, id_matches
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
