"""EndTxn (key 26).

Behavior:
- Commits or aborts the producer's ongoing transaction: the coordinator writes
  PrepareCommit/PrepareAbort to `__transaction_state`, answers, and then has every
  partition's leader write a COMMIT/ABORT marker before it records CompleteCommit /
  CompleteAbort. The answer therefore means the outcome is decided and durable; the markers
  follow (a later request of the same transactional id gets CONCURRENT_TRANSACTIONS until
  they are written).
- WRITE on the transactional id is needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
- A retry of an end already complete is NONE; the other outcome for it INVALID_TXN_STATE;
  an end with no transaction open INVALID_TXN_STATE (transactions v1), while one is ending
  CONCURRENT_TRANSACTIONS. Other errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (an older epoch:
  a zombie, or a transaction the coordinator aborted on timeout), INVALID_REQUEST (empty id).
- Transactions v2 (v5 while `transaction.version` is finalized at 2, KIP-890 part 2): every
  end bumps the producer epoch and the answer carries the producer id and epoch to use next
  (a new producer id when the epochs ran out); an end with the epoch just before the
  current one is a retry; an abort is allowed with nothing added.

Version notes: v1 same as v0; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3
flexible; v4 TRANSACTION_ABORTABLE (KIP-1050; not answered here); v5 transactions v2, with
ProducerId and ProducerEpoch in the response (-1 for v1 ends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.txn_common import for_version, transactions_v2, txn_driver
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.coordinator.transactions.txn_api import EndResult
from strom.wire.errors import ErrorCode
from strom.wire.messages.end_txn import EndTxnRequest, EndTxnResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5

TRANSACTIONS_V2_VERSION = 5


async def handle(
    broker: BrokerState, request: RequestContext, body: EndTxnRequest
) -> EndTxnResponse:
    version = request.api_version
    if allowed(
        broker, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):
        result = await _end(broker, body, version)
    else:
        result = EndResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    response = EndTxnResponse(error_code=for_version(result.error, API_KEY, version))
    if version >= TRANSACTIONS_V2_VERSION:
        response.producer_id = result.producer_id
        response.producer_epoch = result.producer_epoch
    return response


async def _end(broker: BrokerState, body: EndTxnRequest, version: int) -> EndResult:
    driver = txn_driver(broker)
    if driver is None:
        return EndResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not body.transactional_id:
        return EndResult(ErrorCode.INVALID_REQUEST)
    error = await driver.ready(body.transactional_id)
    if error:
        return EndResult(error)
    v2 = version >= TRANSACTIONS_V2_VERSION and transactions_v2(broker)
    return await driver.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed, 2 if v2 else 0
    )
