"""DeleteTopics (key 20).

Behavior:
- A thin layer over the controller (`QuorumController.delete_topics`), which
  answers as KRaft does: topics by name (every version) or by id (v6), unknown
  names UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID, malformed or
  repeated entries INVALID_REQUEST with Kafka's messages, each entry on its own.
- `delete.topic.enable=false` fails every entry, before anything else:
  INVALID_REQUEST before v3, TOPIC_DELETION_DISABLED from v3 (no message).
- `timeout_ms` is the controller deadline (see `strom.broker.admin.deadline`): when
  it passes before the command runs, every entry gets REQUEST_TIMED_OUT and
  nothing is deleted; `timeout_ms <= 0` always expires unless no entry names a
  topic the controller would have to look up.
- On a broker that is not the active controller the request goes to the active controller as
  is (see `strom.broker.admin.forwarding`), which applies everything above.
- Each deleted topic's partitions count against the client's `controller_mutation_rate`
  (`strom.broker.handlers.mutation_quota`): from v5, a topic met with an empty bucket is
  THROTTLING_QUOTA_EXCEEDED and is not deleted.
- Internal topics are not protected, as in Kafka (the CLI refuses, the broker
  does not); `__cluster_metadata` is no topic of the image, so it is unknown.
- When the response is sent the deletion is durable and the partition logs are
  gone (`strom.broker.replication.partitions` follows every publish).

Version notes: v1 is the oldest Kafka 4.0 serves; v2-v3 TOPIC_DELETION_DISABLED
from v3; v4 is flexible; v5 adds error messages and refuses topics over the controller mutation quota
(THROTTLING_QUOTA_EXCEEDED, KIP-599); v6 names topics by id.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from strom.broker.admin.deadline import before_deadline
from strom.broker.admin.forwarding import forward
from strom.broker.handlers.mutation_quota import THROTTLED_MESSAGE, admit, settle
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6

State = DeleteTopicsRequest.DeleteTopicState
Result = DeleteTopicsResponse.DeletableTopicResult


async def handle(
    broker: BrokerState, request: RequestContext, body: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    """DELETE on each topic (named, or by id when the id is known): the others are
    TOPIC_AUTHORIZATION_FAILED."""
    if broker.authorizer is None:
        return await _delete(broker, request, body)
    version = request.api_version
    states = body.topics if version >= 6 else [State(name=n) for n in body.topic_names]

    def refused(state: DeleteTopicsRequest.DeleteTopicState) -> bool:
        name = state.name
        if name is None:
            topic = broker.image.topic_by_id(state.topic_id)
            if topic is None:
                return False  # unknown id: the controller answers UNKNOWN_TOPIC_ID
            name = topic.name
        return not allowed(broker, request, AclOperation.DELETE, ResourceType.TOPIC, name)

    denied = [s for s in states if refused(s)]
    if not denied:
        return await _delete(broker, request, body)
    kept = [s for s in states if s not in denied]
    subset = _subset(body, version, kept)
    response = await _delete(broker, request, subset) if kept else DeleteTopicsResponse(responses=[])
    response.responses += [
        Result(s.name, s.topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        for s in denied
    ]
    return response


async def _delete(
    broker: BrokerState, request: RequestContext, body: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    """The topics the client's controller mutation quota admits, deleted."""
    version = request.api_version
    states = body.topics if version >= 6 else [State(name=n) for n in body.topic_names]
    admitted, throttled, quota = admit(broker, request, 5, states, lambda s: _partitions(broker, s))
    if not throttled:
        response = await _delete_admitted(broker, request, body)
    elif admitted:
        response = await _delete_admitted(broker, request, _subset(body, version, admitted))
    else:
        response = DeleteTopicsResponse(responses=[])
    if quota is not None:
        failed = {(r.name, r.topic_id) for r in response.responses if r.error_code}
        settle(quota, request, sum(
            _partitions(broker, s) for s in admitted
            if any(s.name in (name, None) and s.topic_id in (topic_id, ZERO_UUID)
                   for name, topic_id in failed)
        ))  # fmt: skip
    response.responses += [
        Result(s.name, s.topic_id, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        for s in throttled
    ]
    return response


def _partitions(broker: BrokerState, state: DeleteTopicsRequest.DeleteTopicState) -> int:
    """The partitions deleting the named topic removes (none if it is unknown)."""
    if state.name is not None and state.topic_id == ZERO_UUID:
        topic = broker.image.topic(state.name)
    else:
        topic = broker.image.topic_by_id(state.topic_id)
    return 0 if topic is None else len(topic.partitions)


def _subset(
    body: DeleteTopicsRequest, version: int, states: list[DeleteTopicsRequest.DeleteTopicState]
) -> DeleteTopicsRequest:
    if version >= 6:
        return DeleteTopicsRequest(topics=states, timeout_ms=body.timeout_ms)
    return DeleteTopicsRequest(topic_names=[s.name for s in states if s.name is not None],
                               timeout_ms=body.timeout_ms)  # fmt: skip


async def _delete_admitted(
    broker: BrokerState, request: RequestContext, body: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    if not broker.controller.is_active:
        return await forward(broker, request, body, DeleteTopicsResponse)
    version = request.api_version
    states = body.topics if version >= 6 else [State(name=n) for n in body.topic_names]

    async def delete() -> DeleteTopicsResponse:
        return await broker.controller.delete_topics(body, version)

    if not broker.config.delete_topic_enable or not _names_a_topic(states):
        return await delete()
    response = await before_deadline(body.timeout_ms, delete)
    if response is None:
        return DeleteTopicsResponse(
            responses=[
                Result(s.name, s.topic_id, ErrorCode.REQUEST_TIMED_OUT, None) for s in states
            ]
        )
    return response


def _names_a_topic(states: list[DeleteTopicsRequest.DeleteTopicState]) -> bool:
    """Whether Kafka's controller would have to look anything up (only then can it time out)."""
    names = Counter(s.name for s in states if s.name is not None and s.topic_id == ZERO_UUID)
    ids = Counter(s.topic_id for s in states if s.name is None and s.topic_id != ZERO_UUID)
    return any(n == 1 for n in names.values()) or any(n == 1 for n in ids.values())
