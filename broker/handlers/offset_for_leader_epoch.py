"""OffsetForLeaderEpoch (key 23).

Behavior:
- For each partition: the largest known leader epoch <= the requested one and
  the offset where it ended (the log end for the current epoch), from the
  leader-epoch checkpoint; an epoch older than every known one answers itself
  with the first known start offset; an unknown epoch (or an empty history)
  answers leader epoch -1 and end offset -1 with no error.
- Unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; current_leader_epoch
  FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (-1: not checked).
- replica_id (v3+) makes no difference on a single node: the high watermark is
  the log end.

Version notes: v2 baseline (current leader epoch, throttle time); v3
replica_id; v4 flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.data.lookup import Located, locate
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4

EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


async def handle(
    broker: BrokerState, request: RequestContext, body: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics = []
    from_follower = body.replica_id >= 0
    cluster_ok = not from_follower or allowed(
        broker, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER
    )
    for topic in body.topics:
        ok = cluster_ok and (from_follower or allowed(
            broker, request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic))  # fmt: skip
        if not ok:
            refused = [EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      partition=p.partition) for p in topic.partitions]  # fmt: skip
            topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic.topic, refused))
            continue
        results = [_one(broker, topic.topic, p) for p in topic.partitions]
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic.topic, results))
    return OffsetForLeaderEpochResponse(topics=topics)


def _one(
    broker: BrokerState, topic: str, p: OffsetForLeaderEpochRequest.OffsetForLeaderPartition
) -> EpochEndOffset:
    found = locate(broker, topic, p.partition, p.current_leader_epoch)
    if not isinstance(found, Located):
        return EpochEndOffset(error_code=found, partition=p.partition)
    epoch, end_offset = found.log.end_offset_for_epoch(p.leader_epoch)
    if end_offset < 0:
        return EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition)
    return EpochEndOffset(ErrorCode.NONE, p.partition, epoch, end_offset)
