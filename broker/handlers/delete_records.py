"""DeleteRecords (key 21).

Behavior:
- Moves each partition's log start offset up to the requested offset (-1:
  the high watermark) and deletes the segments wholly below it; the answer's
  low watermark is the new log start offset. Asking for less than the current
  log start changes nothing and answers the current one.
- Unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; a topic whose
  cleanup.policy lacks "delete" POLICY_VIOLATION; an offset below -1 or above
  the high watermark OFFSET_OUT_OF_RANGE; disk errors KAFKA_STORAGE_ERROR.
  Errors answer low watermark -1.
- Long-polling fetches on the partition are woken (their offset may now be
  out of range). With one replica nothing has to wait for followers, so
  timeout_ms is not needed. The new log start offset becomes durable with the
  next offset checkpoint (log.flush.offset.checkpoint.interval.ms), as in Kafka.

Version notes: v1 same as v0; v2 flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.data.lookup import Located, locate
from strom.broker.data.waiters import DataWaiters
from strom.storage import LogError
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

Result = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle(
    broker: BrokerState, request: RequestContext, body: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics = []
    for topic in body.topics:
        results = [_one(broker, topic.name, p) for p in topic.partitions]
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(topic.name, results))
    return DeleteRecordsResponse(topics=topics)


def _one(broker: BrokerState, topic: str, p: DeleteRecordsRequest.DeleteRecordsPartition) -> Result:
    index = p.partition_index
    found = locate(broker, topic, index)
    if not isinstance(found, Located):
        return Result(index, -1, found)
    log = found.log
    if not log.config.delete:
        return Result(index, -1, ErrorCode.POLICY_VIOLATION)
    try:
        low_watermark = log.delete_records_before(p.offset)
    except LogError as exc:
        return Result(index, -1, exc.error)
    except OSError:
        return Result(index, -1, ErrorCode.KAFKA_STORAGE_ERROR)
    DataWaiters.of(broker).changed(topic, index)
    return Result(index, low_watermark, ErrorCode.NONE)
