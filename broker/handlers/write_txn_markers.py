"""WriteTxnMarkers (key 27), broker to broker.

Behavior:
- Sent by a transaction coordinator to each partition leader of a transaction it ends: one
  COMMIT or ABORT marker per (producer id, epoch, coordinator epoch) for the listed
  partitions. Each partition is written by this broker as its leader, with acks=all, so
  NONE means the ISR holds the marker; on a `__consumer_offsets` partition the group
  coordinator then commits (or drops) the producer's transactional offsets of that
  partition's groups.
- Per partition: UNKNOWN_TOPIC_OR_PARTITION (not hosted here), NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS (ISR below min.insync.replicas, nothing written),
  NOT_ENOUGH_REPLICAS_AFTER_APPEND / REQUEST_TIMED_OUT (written, not yet replicated),
  INVALID_PRODUCER_EPOCH (an epoch older than the producer's),
  TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the producer's last
  marker), KAFKA_STORAGE_ERROR. The coordinator retries the retriable ones.
- The markers of one request are written concurrently; the response lists them in
  request order. The sender needs CLUSTER_ACTION on the cluster (brokers) or, as Kafka
  accepts for `kafka-transactions.sh abort` run by an administrator, ALTER on it; else every
  partition is CLUSTER_AUTHORIZATION_FAILED.

Version notes: only v1 (flexible) since Kafka 4.0 removed v0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from strom.broker.data.txn_marker_channel import write_markers_here
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 1

Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


async def handle(
    broker: BrokerState, request: RequestContext, body: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    results: list[dict[tuple[str, int], ErrorCode]] = [{} for _ in body.markers]
    if not (
        allowed(broker, request, AclOperation.ALTER, ResourceType.CLUSTER)
        or allowed(broker, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    ):
        for index, marker in enumerate(body.markers):
            results[index] = {
                (t.name, p): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                for t in marker.topics
                for p in t.partition_indexes
            }
        return _response(body, results)

    async def one(index: int, marker: WriteTxnMarkersRequest.WritableTxnMarker) -> None:
        partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        results[index] = await write_markers_here(
            broker,
            broker.replication,
            broker.waiters,
            broker.min_isr,
            partitions,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            commit=marker.transaction_result,
        )

    async with trio.open_nursery() as nursery:
        for index, marker in enumerate(body.markers):
            nursery.start_soon(one, index, marker)
    return _response(body, results)


def _response(
    body: WriteTxnMarkersRequest, results: list[dict[tuple[str, int], ErrorCode]]
) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=[
            Result(
                producer_id=marker.producer_id,
                topics=[
                    TopicResult(
                        t.name,
                        [
                            PartitionResult(p, errors.get((t.name, p), ErrorCode.NONE))
                            for p in t.partition_indexes
                        ],
                    )
                    for t in marker.topics
                ],
            )
            for marker, errors in zip(body.markers, results, strict=True)
        ]
    )
