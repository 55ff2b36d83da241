"""DescribeProducers (key 61).

Behavior:
- For each requested partition, the idempotent/transactional producers the
  log still tracks (not yet expired by producer.id.expiration.ms): producer
  id and epoch, last sequence, last timestamp, coordinator epoch and the
  first offset of an open transaction (-1 if none).
- An invalid topic name is INVALID_TOPIC_EXCEPTION and an unknown topic
  UNKNOWN_TOPIC_OR_PARTITION, for every requested partition, with Kafka's
  error message; an unknown partition of a known topic is
  UNKNOWN_TOPIC_OR_PARTITION without a message.

Version notes: only v0 (flexible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.data.lookup import Located, locate
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0

Partition = DescribeProducersResponse.PartitionResponse
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
MAX_NAME_LENGTH = 249
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeProducersRequest
) -> DescribeProducersResponse:
    topics = []
    for topic in body.topics:
        error = _topic_error(broker, topic.name)
        if not allowed(broker, request, AclOperation.READ, ResourceType.TOPIC, topic.name):
            error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        partitions = [
            Partition(index, error[0], error[1]) if error else _one(broker, topic.name, index)
            for index in topic.partition_indexes
        ]
        topics.append(DescribeProducersResponse.TopicResponse(topic.name, partitions))
    return DescribeProducersResponse(topics=topics)


def _topic_error(broker: BrokerState, name: str) -> tuple[ErrorCode, str] | None:
    invalid = _invalid_name(name)
    if invalid is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, invalid
    if broker.image.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE
    return None


def _invalid_name(name: str) -> str | None:
    """Kafka's Topic.validate messages."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not set(name) <= _LEGAL:
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def _one(broker: BrokerState, topic: str, index: int) -> Partition:
    found = locate(broker, topic, index)
    if not isinstance(found, Located):
        return Partition(partition_index=index, error_code=found)
    producers = [
        DescribeProducersResponse.ProducerState(
            producer_id=p.producer_id,
            producer_epoch=p.producer_epoch,
            last_sequence=p.last_sequence,
            last_timestamp=p.last_timestamp,
            coordinator_epoch=p.coordinator_epoch,
            current_txn_start_offset=p.current_txn_start_offset,
        )
        for p in found.log.producers()
    ]
    return Partition(partition_index=index, error_code=ErrorCode.NONE, active_producers=producers)
