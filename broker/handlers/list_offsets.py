"""ListOffsets (key 2).

Behavior:
- Timestamp -1 (latest): the high watermark for consumers reading
  uncommitted, the last stable offset for read_committed, the log end for
  replicas (replica_id >= 0 or the debug id -2); timestamp -1 and the
  partition's current leader epoch (v4+).
- -2 (earliest): the log start offset, with the first cached epoch if it starts
  at or before the log start (else -1). -4 (earliest local): the same, since
  nothing is tiered. -3 (max timestamp): the first record holding the largest
  timestamp and its batch's epoch. -5 (latest tiered): offset -1 and epoch -1,
  Kafka's answer when remote storage is off. Any other timestamp: the first
  record at or after it (nothing: offset/timestamp -1); a found offset at or
  past the last fetchable one (high watermark / LSO) is not reported. Kafka
  applies these by value, but only from the version that introduced them:
  -3 before v7, -4 before v8 and -5 before v9 are UNSUPPORTED_VERSION for that
  partition, whether or not the topic exists (found by differential testing).
- A partition named twice is INVALID_REQUEST (every occurrence); unknown topic
  or partition UNKNOWN_TOPIC_OR_PARTITION; a partition this broker does not lead
  NOT_LEADER_OR_FOLLOWER (the debugging replica id -2 may read a follower
  replica here, as in Kafka); current_leader_epoch
  FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH. Errors carry -1 offset and
  timestamp.

Version notes: v1 baseline (single offset plus timestamp); v2 isolation level;
v4 current leader epoch and leader epoch; v5 OFFSET_NOT_AVAILABLE (never on a
single node); v6 flexible; v7 -3; v8 -4; v9 -5; v10 timeout_ms (remote reads;
unused).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from strom.broker.data.lookup import Located, locate
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState
    from strom.storage import PartitionLog

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 10

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
FIRST_VERSION_OF = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
"""A special timestamp in an older version is UNSUPPORTED_VERSION, before any topic lookup."""
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
"""May read a follower replica's log (Kafka's fetchOnlyFromLeader is false only for it)."""
FIRST_EPOCH_VERSION = 4
READ_COMMITTED = 1

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


async def handle(
    broker: BrokerState, request: RequestContext, body: ListOffsetsRequest
) -> ListOffsetsResponse:
    counts = Counter((t.name, p.partition_index) for t in body.topics for p in t.partitions)
    isolation = body.isolation_level if body.replica_id == CONSUMER_REPLICA_ID else None
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            if counts[(topic.name, p.partition_index)] > 1:
                partitions.append(_error(p.partition_index, ErrorCode.INVALID_REQUEST))
                continue
            if request.api_version < FIRST_VERSION_OF.get(p.timestamp, 0):
                partitions.append(_error(p.partition_index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            if not allowed(broker, request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                partitions.append(_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            partitions.append(_one(broker, topic.name, p, isolation, body.replica_id))
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(topic.name, partitions))
    if request.api_version < FIRST_EPOCH_VERSION:  # the field is not ignorable before v4
        for answer in (a for t in topics for a in t.partitions):
            answer.leader_epoch = -1
    return ListOffsetsResponse(topics=topics)


def _error(index: int, error: ErrorCode) -> PartitionResponse:
    return PartitionResponse(
        partition_index=index, error_code=error, timestamp=-1, offset=-1, leader_epoch=-1
    )


def _one(
    broker: BrokerState,
    topic: str,
    p: ListOffsetsRequest.ListOffsetsPartition,
    isolation: int | None,
    replica_id: int,
) -> PartitionResponse:
    found = locate(
        broker,
        topic,
        p.partition_index,
        p.current_leader_epoch,
        require_leader=replica_id != DEBUGGING_REPLICA_ID,
    )
    if not isinstance(found, Located):
        return _error(p.partition_index, found)
    partition, log = found
    index = p.partition_index
    if isolation is None:
        fetchable = log.log_end_offset
    elif isolation == READ_COMMITTED:
        fetchable = log.last_stable_offset
    else:
        fetchable = log.high_watermark
    ts = p.timestamp
    if ts == LATEST:
        return PartitionResponse(index, ErrorCode.NONE, -1, fetchable, partition.leader_epoch)
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return PartitionResponse(index, ErrorCode.NONE, -1, log.log_start_offset, _first_epoch(log))
    if ts == LATEST_TIERED:
        return PartitionResponse(index, ErrorCode.NONE, -1, -1, -1)
    hit = log.max_timestamp_offset() if ts == MAX_TIMESTAMP else log.offset_for_timestamp(ts)
    if hit is None or hit[0] >= fetchable:
        return PartitionResponse(index, ErrorCode.NONE, -1, -1, -1)
    offset, timestamp, epoch = hit
    return PartitionResponse(index, ErrorCode.NONE, timestamp, offset, epoch if epoch >= 0 else -1)


def _first_epoch(log: PartitionLog) -> int:
    """The earliest cached epoch when it covers the log start offset (Kafka's EARLIEST answer)."""
    entries = log.epochs.entries
    if entries and entries[0][1] <= log.log_start_offset:
        return entries[0][0]
    return -1
