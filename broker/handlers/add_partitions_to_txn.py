"""AddPartitionsToTxn (key 24).

Behavior:
- v0-3 (producers): one transaction. WRITE on the transactional id is needed
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition). If any partition is of a topic
  the principal may not WRITE or of an internal topic (TOPIC_AUTHORIZATION_FAILED whatever
  the ACLs, as in Kafka: offsets join through AddOffsetsToTxn) or that does not exist
  (UNKNOWN_TOPIC_OR_PARTITION), the others are OPERATION_NOT_ATTEMPTED and nothing is added
  (Kafka's order). Otherwise the coordinator of the transactional id
  adds them (starting the transaction if none is open) and every partition gets its one
  answer, sent once the addition is written to `__transaction_state`: NONE;
  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE (look up or
  retry); INVALID_PRODUCER_ID_MAPPING (unknown id, or another producer id);
  PRODUCER_FENCED (an older epoch); CONCURRENT_TRANSACTIONS (the previous transaction is
  still ending; retry); INVALID_REQUEST for an empty transactional id.
- v4+ (brokers, KIP-890): CLUSTER_ACTION is needed (else CLUSTER_AUTHORIZATION_FAILED at the
  top and no results, as Kafka answers); several transactions, each answered on its own. `verify_only`
  asks whether the partitions are already in the producer's ongoing transaction (NONE, or
  TRANSACTION_ABORTABLE for those that are not; errors as above for the whole
  transaction), which a partition leader asks before the first transactional write of a
  transaction; without it (v5, transactions v2) the partitions are added, as a write of a
  transactions v2 producer adds its partition itself.

Version notes: v1 same as v0; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3
flexible; v4 batched transactions, verify_only, a top-level error, broker-only; v5
TRANSACTION_ABORTABLE (KIP-1050) and transactions v2 additions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from strom.broker.drivers.topics import is_internal_topic
from strom.broker.handlers.txn_common import for_version, txn_driver
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.coordinator.transactions.txn_metadata import TopicPartition
from strom.wire.errors import ErrorCode
from strom.wire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5

BATCHED_VERSION = 4
ABORTABLE_VERSION = 5
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


async def handle(
    broker: BrokerState, request: RequestContext, body: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    version = request.api_version
    if version < BATCHED_VERSION:
        partitions = _partitions(body.v3_and_below_topics)
        errors = await _one(
            broker,
            request,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            partitions,
            verify_only=False,
            version=version,
        )
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(errors))
    results: list[AddPartitionsToTxnResponse.AddPartitionsToTxnResult] = []
    if not allowed(broker, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    async def one(txn: AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction) -> None:
        errors = await _one(
            broker,
            None,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            _partitions(txn.topics),
            verify_only=txn.verify_only,
            version=version,
        )
        results.append(
            AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_by_topic(errors)
            )
        )

    async with trio.open_nursery() as nursery:
        for txn in body.transactions:
            nursery.start_soon(one, txn)
    order = {txn.transactional_id: i for i, txn in enumerate(body.transactions)}
    results.sort(key=lambda r: order.get(r.transactional_id, 0))
    return AddPartitionsToTxnResponse(error_code=ErrorCode.NONE, results_by_transaction=results)


async def _one(
    broker: BrokerState,
    request: RequestContext | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
    *,
    verify_only: bool,
    version: int,
) -> dict[TopicPartition, ErrorCode]:
    """One transaction; `request`: the producer's (v0-3), whose principal needs WRITE on the
    transactional id and on each topic (a broker's v4+ request was checked for
    CLUSTER_ACTION)."""
    refused: dict[TopicPartition, ErrorCode] = {}
    if request is not None:
        if not allowed(
            broker, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        refused = {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for tp in partitions
            if is_internal_topic(tp[0])
            or not allowed(broker, request, AclOperation.WRITE, ResourceType.TOPIC, tp[0])
        }
    refused |= {
        tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for tp in partitions
        if tp not in refused and broker.image.partition(*tp) is None
    }
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    driver = txn_driver(broker)
    if driver is None:
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not transactional_id:
        return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
    error = await driver.ready(transactional_id)
    if error:
        return dict.fromkeys(partitions, error)
    if verify_only:
        errors = driver.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    else:
        client_tv = 2 if version >= ABORTABLE_VERSION else 0  # a v5 add is a v2 write's
        added = await driver.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, client_tv
        )
        errors = dict.fromkeys(partitions, added)
    return {tp: _for_version(e, version) for tp, e in errors.items()}


def _for_version(error: ErrorCode, version: int) -> ErrorCode:
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < ABORTABLE_VERSION:
        return ErrorCode.INVALID_TXN_STATE
    return for_version(error, API_KEY, version)


def _partitions(
    topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


def _by_topic(errors: dict[TopicPartition, ErrorCode]) -> list[TopicResult]:
    topics: dict[str, list[PartitionResult]] = {}
    for (topic, index), error in errors.items():
        topics.setdefault(topic, []).append(PartitionResult(index, error))
    return [TopicResult(name, parts) for name, parts in topics.items()]
