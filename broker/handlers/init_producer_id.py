"""InitProducerId (key 22).

Behavior:
- Without a transactional id (idempotent producer): a fresh producer id with
  epoch 0, always, as Kafka's TransactionCoordinator does; ids come from
  controller-allocated blocks (broker.producer_ids). A given producer id and
  epoch (v3+, KIP-360) are ignored: the producer just gets a new id.
- ProducerId and ProducerEpoch must both be -1 or both be set, else
  INVALID_REQUEST.
- With a transactional id: WRITE on it is needed
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); "" is INVALID_REQUEST; a timeout <= 0
  or above `transaction.max.timeout.ms` is INVALID_TRANSACTION_TIMEOUT. Otherwise
  the transaction coordinator of the id answers (a broker that is not is
  NOT_COORDINATOR, one loading the id's `__transaction_state` partition
  COORDINATOR_LOAD_IN_PROGRESS): a new id gets a producer id and epoch 0; a
  known one the next epoch (fencing every older producer), or a fresh producer
  id once its epochs are exhausted. An open transaction is aborted first and
  the request answered CONCURRENT_TRANSACTIONS, so the client retries and gets
  the epoch after the fence; CONCURRENT_TRANSACTIONS also while a transaction
  ends. With ProducerId/ProducerEpoch (KIP-360, a producer recovering), the
  current or the previous epoch continues, anything else is PRODUCER_FENCED.
  The answer is sent once the new epoch is written to `__transaction_state`.
- Errors carry producer id -1 and epoch -1.

Version notes: v2 flexible; v3 adds ProducerId/ProducerEpoch; v4 answers
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v5 may answer
TRANSACTION_ABORTABLE (KIP-1050; this API never does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.data.producer_ids import ProducerIdError
from strom.broker.handlers.txn_common import for_version, txn_driver
from strom.broker.security.authorization import allowed, allowed_on_some
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


async def handle(
    broker: BrokerState, request: RequestContext, body: InitProducerIdRequest
) -> InitProducerIdResponse:
    if (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    transactional_id = body.transactional_id
    if transactional_id is not None:
        if not allowed(broker, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                       transactional_id):  # fmt: skip
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not transactional_id:
            return _error(ErrorCode.INVALID_REQUEST)
        timeout = body.transaction_timeout_ms
        if timeout <= 0 or timeout > broker.config.transaction_max_timeout_ms:
            return _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        return await _transactional(broker, request, body, transactional_id, timeout)
    # KIP-679: idempotence needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    if not allowed(broker, request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER) and not (
        allowed_on_some(broker, request, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        producer_id = await broker.producer_ids.next_id()
    except ProducerIdError as exc:
        return _error(exc.error)
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
    )


async def _transactional(
    broker: BrokerState,
    request: RequestContext,
    body: InitProducerIdRequest,
    transactional_id: str,
    timeout_ms: int,
) -> InitProducerIdResponse:
    driver = txn_driver(broker)
    if driver is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    error = await driver.ready(transactional_id)
    if error:
        return _error(error)
    expected = None
    if body.producer_id != NO_PRODUCER_ID:
        expected = (body.producer_id, body.producer_epoch)
    result = await driver.init_producer_id(transactional_id, timeout_ms, expected)
    if result.error:
        return _error(for_version(result.error, API_KEY, request.api_version))
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=result.producer_id, producer_epoch=result.producer_epoch
    )


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )
