"""DeleteRecords (key 21).

Behavior:
- Moves each partition's log start offset up to the requested offset (-1:
  the high watermark) and deletes the segments wholly below it. Asking for
  less than the current log start changes nothing.
- The answer's low watermark is the partition's low watermark, Kafka's
  `Partition.lowWatermarkIfLeader`: on a single-replica partition the log
  start offset, answered at once. On a replicated partition it is the
  smallest log start offset of the leader and of every assigned follower on
  a registered, unfenced broker (in the ISR or not), and the answer waits
  (Kafka's DelayedDeleteRecords) until that low watermark reaches the
  requested offset: followers move their log start to the leader's with
  their next fetch answer and report it in the fetch after that
  (docs/replication.md). All partitions of a request wait together, woken by
  the followers' fetches and by metadata changes (a fenced follower stops
  counting), never by polling. After timeout_ms the partitions still short
  answer REQUEST_TIMED_OUT with the low watermark as it was right after the
  leader's deletion; a partition this broker stopped leading meanwhile
  answers NOT_LEADER_OR_FOLLOWER with low watermark -1 (the leader's own log
  start has moved either way). A new leader epoch on this broker keeps the
  wait, with every follower's log start unknown until its next fetch.
- Unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; not the leader (or a
  replicated partition whose leadership this broker has not taken up yet)
  NOT_LEADER_OR_FOLLOWER; a topic whose cleanup.policy lacks "delete"
  POLICY_VIOLATION; an offset below -1 or above the high watermark
  OFFSET_OUT_OF_RANGE; disk errors KAFKA_STORAGE_ERROR. Errors answer low
  watermark -1.
- Long-polling fetches on the partition are woken (their offset may now be
  out of range). The new log start offset becomes durable with the next
  offset checkpoint (log.flush.offset.checkpoint.interval.ms), as in Kafka.

Version notes: v1 same as v0; v2 flexible. Every version waits for the low
watermark as above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.broker.data.lookup import Located, locate
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.storage import LogError
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState
    from strom.storage import PartitionLog

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2
HIGH_WATERMARK = -1
"""The requested offset that means "the high watermark"."""
INVALID_LOW_WATERMARK = -1

Result = DeleteRecordsResponse.DeleteRecordsPartitionResult


@dataclass
class _Pending:
    """A replicated partition whose low watermark has not reached `required` yet."""

    topic: str
    result: Result
    required: int
    log: PartitionLog
    """The leader's log: a new leader epoch here keeps waiting (Kafka checks only that the
    leader is local), a lost leadership or a replaced log ends the wait."""


async def handle(
    broker: BrokerState, request: RequestContext, body: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics = []
    pending: list[_Pending] = []
    for topic in body.topics:
        if not allowed(broker, request, AclOperation.DELETE, ResourceType.TOPIC, topic.name):
            results = [Result(p.partition_index, INVALID_LOW_WATERMARK,
                              ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions]  # fmt: skip
        else:
            results = [_one(broker, topic.name, p, pending) for p in topic.partitions]
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(topic.name, results))
    await _await_low_watermark(broker, pending, body.timeout_ms)
    return DeleteRecordsResponse(topics=topics)


def _one(
    broker: BrokerState,
    topic: str,
    p: DeleteRecordsRequest.DeleteRecordsPartition,
    pending: list[_Pending],
) -> Result:
    index = p.partition_index
    found = locate(broker, topic, index)
    if not isinstance(found, Located):
        return Result(index, INVALID_LOW_WATERMARK, found)
    partition, log = found
    replication = broker.replication
    leadership = replication.leaders.get((topic, index))
    if leadership is None and len(partition.replicas) > 1:
        # the image names this broker leader but it has not taken the role up yet
        return Result(index, INVALID_LOW_WATERMARK, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if not log.config.delete:
        return Result(index, INVALID_LOW_WATERMARK, ErrorCode.POLICY_VIOLATION)
    required = log.high_watermark if p.offset == HIGH_WATERMARK else p.offset
    try:
        log_start = log.delete_records_before(p.offset)
    except LogError as exc:
        return Result(index, INVALID_LOW_WATERMARK, exc.error)
    except OSError:
        return Result(index, INVALID_LOW_WATERMARK, ErrorCode.KAFKA_STORAGE_ERROR)
    broker.waiters.changed(topic, index)
    if leadership is None:
        return Result(index, log_start, ErrorCode.NONE)
    low_watermark = replication.low_watermark((topic, index))
    assert low_watermark is not None  # still led: nothing awaited since the lookup
    if low_watermark >= required:
        return Result(index, low_watermark, ErrorCode.NONE)
    result = Result(index, low_watermark, ErrorCode.REQUEST_TIMED_OUT)
    pending.append(_Pending(topic, result, required, log))
    return result


async def _await_low_watermark(
    broker: BrokerState, pending: list[_Pending], timeout_ms: int
) -> None:
    """Until every pending partition's low watermark reached its offset (NONE), its leadership
    moved (NOT_LEADER_OR_FOLLOWER) or `timeout_ms` passed (they keep REQUEST_TIMED_OUT)."""
    replication = broker.replication

    def key(w: _Pending) -> tuple[str, int]:
        return w.topic, w.result.partition_index

    def settled(w: _Pending) -> bool:
        leadership = replication.leaders.get(key(w))
        if leadership is None or leadership.log is not w.log:
            w.result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            w.result.low_watermark = INVALID_LOW_WATERMARK
            return True
        low_watermark = replication.low_watermark(key(w))
        if low_watermark is None or low_watermark < w.required:
            return False
        w.result.error_code = ErrorCode.NONE
        w.result.low_watermark = low_watermark
        return True

    await broker.waiters.settle(pending, key, settled, timeout_ms)
