"""AddOffsetsToTxn (key 25).

Behavior:
- Adds the group's `__consumer_offsets` partition (`abs(javaHashCode(group.id)) %
  offsets.topic.num.partitions`) to the producer's transaction, exactly as
  AddPartitionsToTxn adds a partition (same coordinator, checks and errors), so that the
  transaction's markers reach the offsets a TxnOffsetCommit then writes there. Answered once
  the addition is written to `__transaction_state`.
- Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ
  on the group (GROUP_AUTHORIZATION_FAILED).
- Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
  INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, INVALID_REQUEST
  (empty transactional id).

Version notes: v1 same as v0; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3
flexible; v4 TRANSACTION_ABORTABLE (KIP-1050; not answered here). Transactions v2 clients
no longer send it: their TxnOffsetCommit (v5) adds the partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.drivers.topics import CONSUMER_OFFSETS
from strom.broker.handlers.txn_common import for_version, txn_driver
from strom.broker.security.authorization import allowed
from strom.coordinator.groups.records import partition_for
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(
    broker: BrokerState, request: RequestContext, body: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(
        error_code=for_version(await _add(broker, request, body), API_KEY, request.api_version)
    )


async def _add(
    broker: BrokerState, request: RequestContext, body: AddOffsetsToTxnRequest
) -> ErrorCode:
    if not allowed(
        broker, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not allowed(broker, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    driver = txn_driver(broker)
    if driver is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if not body.transactional_id:
        return ErrorCode.INVALID_REQUEST
    error = await driver.ready(body.transactional_id)
    if error:
        return error
    partition = partition_for(body.group_id, broker.config.offsets_topic_num_partitions)
    return await driver.add_partitions(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        [(CONSUMER_OFFSETS, partition)],
    )
