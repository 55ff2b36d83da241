"""DescribeTopicPartitions (key 75), the paginated topic description of KIP-966.

Behavior:
- Topics are answered in name order: the ones named in the request, or every
  topic when the list is empty, starting at the cursor's topic (names before it
  are skipped) and, in that topic, at the cursor's partition.
- At most min(`response_partition_limit`, max.request.partition.size.limit,
  2000 by default) partitions are returned. When a topic does not fit, its
  partitions up to the limit are returned and `next_cursor` points at the
  first one left; when the limit is used up exactly, the cursor points at the
  next topic's partition 0. A later request passes the cursor back unchanged.
- A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (an illegal
  name INVALID_TOPIC_EXCEPTION) with no partitions; it uses none of the
  limit. When listing every topic there are no such entries.
- A cursor whose topic is not among the named topics fails the request with
  INVALID_REQUEST on every named topic, as Kafka does.
- Partitions carry leader, epoch, replicas and ISR; replicas on missing, fenced
  or listener-less brokers, or reported offline by their broker (a failed log
  dir, a log that cannot be opened), are offline, and such a leader reads -1
  (`strom.broker.admin.partition_leadership`, shared with Metadata). Eligible
  leader replicas and the last known ELR (KIP-966) as the metadata holds them (empty
  lists unless `eligible.leader.replicas.version` is enabled): `kafka-topics --describe`
  prints them as "Elr:" and "LastKnownElr:".
- Every topic answered carries its authorized operations (all of them, no
  authorizer; see `strom.broker.admin.authz`).

Version notes: v0 only (flexible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.authz import authorized
from strom.broker.admin.partition_leadership import leadership
from strom.broker.drivers.topics import is_internal_topic
from strom.broker.security.authorization import allowed
from strom.coordinator.controller.names import invalid_topic_name
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState
    from strom.coordinator.metadata.image import MetadataImage, PartitionImage, TopicImage

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

PARTITION_SIZE_LIMIT_KEY = "max.request.partition.size.limit"
DEFAULT_PARTITION_SIZE_LIMIT = 2000
Response = DescribeTopicPartitionsResponse
Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    image = broker.image
    cursor = body.cursor
    first = cursor.topic_name if cursor is not None else ""
    every = not body.topics
    named = image.topic_names() if every else [t.name for t in body.topics]
    names = sorted({n for n in named if n >= first})
    if cursor is not None and not every and cursor.topic_name not in names:
        return Response(
            topics=[Topic(error_code=ErrorCode.INVALID_REQUEST, name=t.name) for t in body.topics]
        )
    remaining = min(_partition_size_limit(broker), body.response_partition_limit)
    response = Response()
    for name in names:
        if remaining <= 0:
            if remaining == 0:
                response.next_cursor = Response.Cursor(name, 0)
            break
        if not allowed(broker, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not every:  # named: refused, whether or not it exists
                response.topics.append(
                    Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                          topic_authorized_operations=0)
                )
            continue
        ops = authorized(True, broker, request, ResourceType.TOPIC, name)
        topic = image.topic(name)
        if topic is None:
            if not every:
                response.topics.append(_missing(name, ops))
            continue
        start = cursor.partition_index if cursor is not None and name == first else 0
        upper = min(topic.num_partitions, start + remaining)
        partitions = [
            _partition(image, topic, p, broker, request.listener)
            for p in (topic.partition(i) for i in range(max(start, 0), upper))
            if p is not None
        ]
        response.topics.append(_topic(topic, partitions, ops))
        if upper < topic.num_partitions:
            response.next_cursor = Response.Cursor(name, upper)
            break
        remaining -= len(partitions)
    return response


def _partition_size_limit(broker: BrokerState) -> int:
    """Kafka's max.request.partition.size.limit: Strom accepts it as an unused key, so read it here."""
    for key, raw in broker.config.ignored_settings:
        if key == PARTITION_SIZE_LIMIT_KEY:
            try:
                return max(int(raw.strip()), 1)
            except ValueError:
                break
    return DEFAULT_PARTITION_SIZE_LIMIT


def _missing(name: str, ops: int) -> Topic:
    error = (
        ErrorCode.INVALID_TOPIC_EXCEPTION
        if invalid_topic_name(name)
        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    return Topic(
        error_code=error,
        name=name,
        is_internal=is_internal_topic(name),
        topic_authorized_operations=ops,
    )


def _topic(topic: TopicImage, partitions: list[Partition], ops: int) -> Topic:
    return Topic(
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal_topic(topic.name),
        partitions=partitions,
        topic_authorized_operations=ops,
    )


def _partition(
    image: MetadataImage,
    topic: TopicImage,
    partition: PartitionImage,
    broker: BrokerState,
    listener: str,
) -> Partition:
    leader, offline = leadership(broker, image, topic.topic_id, partition, listener)
    return Partition(
        partition_index=partition.partition_id,
        leader_id=leader,
        leader_epoch=partition.leader_epoch,
        replica_nodes=list(partition.replicas),
        isr_nodes=list(partition.isr),
        eligible_leader_replicas=list(partition.elr),
        last_known_elr=list(partition.last_known_elr),
        offline_replicas=offline,
    )
