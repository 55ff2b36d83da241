"""CreateTopics (key 19).

Behavior:
- A thin layer over the controller (`QuorumController.create_topics`), which
  applies Kafka's KRaft checks and messages: illegal or colliding names
  (INVALID_TOPIC_EXCEPTION), TOPIC_ALREADY_EXISTS, unknown or invalid configs
  (INVALID_CONFIG with the reason), INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR
  (e.g. more replicas than brokers), manual assignments, names given twice
  ("Duplicate topic name.", after the other results). -1 partitions or
  replication factor take the broker defaults at every version, as KRaft does.
- `__cluster_metadata` is never created: INVALID_REQUEST "Creation of internal
  topic __cluster_metadata is prohibited.", after every other result (Kafka's
  ControllerApis). Other internal topics may be created, as in Kafka.
- `timeout_ms` is the controller deadline (see `strom.broker.admin.deadline`): when
  it passes before the command runs, every entry of the request gets
  REQUEST_TIMED_OUT with no message and nothing is created; `timeout_ms <= 0`
  always expires, except for a request with nothing to hand the controller.
- On a broker that is not the active controller the request goes to the active controller as
  is (see `strom.broker.admin.forwarding`), which applies everything above.
- Each topic's partitions count against the client's `controller_mutation_rate`
  (`strom.broker.handlers.mutation_quota`): from v6, a topic met with an empty bucket is
  THROTTLING_QUOTA_EXCEEDED and is not created.
- `validate_only` answers as a real creation would (v7 even reports a fresh
  topic id) and writes nothing.
- When the response is sent the records are durable, the image published and
  the partition logs created (`strom.broker.replication.partitions` follows every publish), so
  Metadata, Produce and Fetch see the topic at once.

Version notes: v2 is the oldest Kafka 4.0 serves; v4 documents the -1
defaults (KIP-464); v5 is flexible and returns partitions, replication
factor and the effective configs (KIP-525); v6 refuses topics over the controller mutation
quota (THROTTLING_QUOTA_EXCEEDED, KIP-599); v7 returns topic ids.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from strom.broker.admin.deadline import before_deadline
from strom.broker.admin.forwarding import forward
from strom.broker.handlers.mutation_quota import THROTTLED_MESSAGE, admit, settle
from strom.broker.security.authorization import allowed
from strom.coordinator.controller.names import invalid_topic_name
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

CLUSTER_METADATA = "__cluster_metadata"
Result = CreateTopicsResponse.CreatableTopicResult


async def handle(
    broker: BrokerState, request: RequestContext, body: CreateTopicsRequest
) -> CreateTopicsResponse:
    """CREATE on the cluster, or on each topic: the others are TOPIC_AUTHORIZATION_FAILED."""
    if allowed(broker, request, AclOperation.CREATE, ResourceType.CLUSTER):
        return await _create(broker, request, body)
    refused = [
        t for t in body.topics
        if not allowed(broker, request, AclOperation.CREATE, ResourceType.TOPIC, t.name)
    ]  # fmt: skip
    if not refused:
        return await _create(broker, request, body)
    kept = [t for t in body.topics if t not in refused]
    response = (
        await _create(broker, request, CreateTopicsRequest(
            topics=kept, timeout_ms=body.timeout_ms, validate_only=body.validate_only))
        if kept else CreateTopicsResponse(topics=[])
    )  # fmt: skip
    response.topics += [
        Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
               error_message="Authorization failed.")
        for t in refused
    ]
    return response


async def _create(
    broker: BrokerState, request: RequestContext, body: CreateTopicsRequest
) -> CreateTopicsResponse:
    """The topics the client's controller mutation quota admits, created."""
    names = Counter(t.name for t in body.topics)
    admitted, throttled, quota = admit(
        broker, request, 6, body.topics, lambda t: _partitions(broker, t, names)
    )
    if not throttled:
        response = await _create_admitted(broker, request, body)
    elif admitted:
        response = await _create_admitted(broker, request, CreateTopicsRequest(
            topics=admitted, timeout_ms=body.timeout_ms, validate_only=body.validate_only))  # fmt: skip
    else:
        response = CreateTopicsResponse(topics=[])
    if quota is not None:
        failed = {r.name for r in response.topics if r.error_code}
        settle(quota, request, sum(_partitions(broker, t, names) for t in admitted if t.name in failed))
    response.topics += [
        Result(name=t.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED, error_message=THROTTLED_MESSAGE)
        for t in throttled
    ]
    return response


def _partitions(
    broker: BrokerState, topic: CreateTopicsRequest.CreatableTopic, names: Counter[str]
) -> int:
    """The partitions a topic's creation adds (its assignments, else its count or the
    default); 0 for one the controller refuses before counting (see `mutation_quota`)."""
    if names[topic.name] > 1 or invalid_topic_name(topic.name) or broker.image.topic(topic.name):
        return 0
    if topic.assignments:
        return len(topic.assignments)
    if topic.num_partitions == -1:
        return broker.config.num_partitions
    return max(0, topic.num_partitions)


async def _create_admitted(
    broker: BrokerState, request: RequestContext, body: CreateTopicsRequest
) -> CreateTopicsResponse:
    if not broker.controller.is_active:
        return await forward(broker, request, body, CreateTopicsResponse)
    counts = Counter(t.name for t in body.topics)
    refused = counts[CLUSTER_METADATA] == 1
    forwarded = CreateTopicsRequest(
        topics=[t for t in body.topics if not (refused and t.name == CLUSTER_METADATA)],
        timeout_ms=body.timeout_ms,
        validate_only=body.validate_only,
    )

    async def create() -> CreateTopicsResponse:
        return await broker.controller.create_topics(forwarded, request.api_version)

    if any(counts[t.name] == 1 for t in forwarded.topics):
        response = await before_deadline(body.timeout_ms, create)
        if response is None:
            return CreateTopicsResponse(
                topics=[
                    Result(name=t.name, error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None)
                    for t in body.topics
                ]
            )
    else:  # only duplicates (or nothing): Kafka answers without a controller event
        response = await create()
    if refused:
        response.topics.append(
            Result(
                name=CLUSTER_METADATA,
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Creation of internal topic {CLUSTER_METADATA} is prohibited.",
            )
        )
    return response
