"""OffsetCommit (key 8).

Behavior:
- Partitions of topics that do not exist are UNKNOWN_TOPIC_OR_PARTITION and
  never reach the coordinator (as Kafka's broker filters them first).
- Group members commit with their member id and generation: an unknown
  member is UNKNOWN_MEMBER_ID, a fenced static member FENCED_INSTANCE_ID,
  a stale generation ILLEGAL_GENERATION, and a group still waiting for its
  leader's assignment REBALANCE_IN_PROGRESS. Commits during
  PreparingRebalance are accepted (consumers commit before rejoining).
- Simple commits (generation -1, as Admin's alterConsumerGroupOffsets,
  Spark and standalone consumers send) are accepted while the group is
  empty, creating it if need be; against an active group they are
  UNKNOWN_MEMBER_ID.
- Metadata longer than `offset.metadata.max.bytes` is
  OFFSET_METADATA_TOO_LARGE for that partition; null metadata is stored as "".
- The response is sent only after the records are in the group's
  `__consumer_offsets` partition; if that write fails every partition gets
  Kafka's coordinator error (NOT_COORDINATOR for a failed disk or lost
  leadership, COORDINATOR_NOT_AVAILABLE for a missing partition,
  UNKNOWN_SERVER_ERROR for a batch too large).

Version notes: v2-v4 retention time (an explicit expiry, written with
OffsetCommitValue v1); v5 drops it; v6 leader epoch; v7 group instance id;
v8 flexible; v9 GROUP_ID_NOT_FOUND (not ILLEGAL_GENERATION) for a missing
group. v0-v1 are gone in Kafka 4.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import committable_partitions, group_driver
from strom.coordinator.groups.api import CommitPartition, CommitRequest
from strom.wire.errors import ErrorCode
from strom.wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9

Topic = OffsetCommitResponse.OffsetCommitResponseTopic
Partition = OffsetCommitResponse.OffsetCommitResponsePartition


async def handle(
    broker: BrokerState, request: RequestContext, body: OffsetCommitRequest
) -> OffsetCommitResponse:
    version = request.api_version
    valid, errors = committable_partitions(broker, request, body.group_id, body.topics)
    if valid:
        errors.update(await _commit(broker, body, version, valid))
    return OffsetCommitResponse(
        topics=[
            Topic(
                name=topic.name,
                partitions=[
                    Partition(p.partition_index, errors[(topic.name, p.partition_index)])
                    for p in topic.partitions
                ],
            )
            for topic in body.topics
        ]
    )


async def _commit(
    broker: BrokerState, body: OffsetCommitRequest, version: int, valid: list[CommitPartition]
) -> dict[tuple[str, int], ErrorCode]:
    driver = group_driver(broker)
    error = ErrorCode.COORDINATOR_NOT_AVAILABLE if driver is None else await driver.ready(body.group_id)
    if driver is None or error:
        return {(p.topic, p.partition): error for p in valid}
    req = CommitRequest(
        group_id=body.group_id,
        generation=body.generation_id_or_member_epoch,
        member_id=body.member_id,
        partitions=valid,
        group_instance_id=body.group_instance_id,
        retention_ms=body.retention_time_ms,
        group_must_exist=version >= 9,
    )
    return await driver.commit(req)
