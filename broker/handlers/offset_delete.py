"""OffsetDelete (key 47).

Behavior:
- Deletes committed offsets of some partitions (a tombstone per offset).
  For a consumer group with members, partitions of topics the group is
  subscribed to are GROUP_SUBSCRIBED_TO_TOPIC and kept; a non-consumer
  group with members is NON_EMPTY_GROUP as a whole.
- Unknown topics' partitions are UNKNOWN_TOPIC_OR_PARTITION; an unknown
  group GROUP_ID_NOT_FOUND.

Version notes: only v0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import group_driver, may_group, may_topic, partition_exists
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    broker: BrokerState, request: RequestContext, body: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    if not may_group(broker, request, AclOperation.DELETE, body.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = group_driver(broker)
    error = (
        ErrorCode.COORDINATOR_NOT_AVAILABLE if driver is None else await driver.ready(body.group_id)
    )
    if driver is None or error:
        return OffsetDeleteResponse(error_code=error)
    errors: dict[tuple[str, int], ErrorCode] = {}
    known: list[tuple[str, int]] = []
    for topic in body.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not may_topic(broker, request, AclOperation.READ, topic.name):
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition_exists(broker, *key):
                known.append(key)
            else:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    deleted = await driver.delete_offsets(body.group_id, known)
    if deleted.error:
        return OffsetDeleteResponse(error_code=deleted.error)
    errors.update(deleted.partitions)
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        p.partition_index, errors[(topic.name, p.partition_index)]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in body.topics
        ]
    )
