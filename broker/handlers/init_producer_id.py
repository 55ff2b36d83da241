"""InitProducerId (key 22).

Behavior:
- Without a transactional id (idempotent producer): a fresh producer id with
  epoch 0, always, as Kafka's TransactionCoordinator does; ids come from
  controller-allocated blocks (broker.producer_ids). A given producer id and
  epoch (v3+, KIP-360) are ignored: the producer just gets a new id.
- ProducerId and ProducerEpoch must both be -1 or both be set, else
  INVALID_REQUEST.
- With a transactional id: "" is INVALID_REQUEST; a timeout <= 0 or above
  `transaction.max.timeout.ms` is INVALID_TRANSACTION_TIMEOUT; otherwise
  NOT_COORDINATOR, which is what a Kafka broker answers for a transactional id
  whose __transaction_state partition it does not own (the client looks the
  coordinator up again and retries). Strom has no transaction coordinator yet.
- Errors carry producer id -1 and epoch -1.

Version notes: v2 flexible; v3 adds ProducerId/ProducerEpoch; v4 may answer
PRODUCER_FENCED, v5 TRANSACTION_ABORTABLE (both transactional only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.data.producer_ids import ProducerIdError
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
        return _error(ErrorCode.NOT_COORDINATOR)
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


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )
