"""CreatePartitions (key 37).

Behavior:
- A thin layer over the controller (`QuorumController.create_partitions`),
  with KRaft's checks and messages: names given twice INVALID_REQUEST first,
  then per topic UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS when the count
  is not an increase ("Topic already has N partition(s)." / "... would not be
  an increase."), INVALID_REPLICA_ASSIGNMENT for assignments that do not fit,
  INVALID_REPLICATION_FACTOR when placement is impossible. New partitions keep
  the replication factor of partition 0.
- `timeout_ms` is the controller deadline (see `strom.broker.admin.deadline`): when
  it passes before the command runs, every entry gets REQUEST_TIMED_OUT and
  nothing changes; `timeout_ms <= 0` always expires unless every name is a
  duplicate. `validate_only` answers as the real change would and writes nothing.
- On a broker that is not the active controller the request goes to the active controller as
  is (see `strom.broker.admin.forwarding`), which applies everything above.
- The partitions added count against the client's `controller_mutation_rate`
  (`strom.broker.handlers.mutation_quota`): from v3, a topic met with an empty bucket is
  THROTTLING_QUOTA_EXCEEDED and does not grow.
- Internal topics may grow, as in Kafka (only its CLI refuses).
- When the response is sent the new partitions' logs exist and Metadata lists
  them (`strom.broker.replication.partitions` follows every publish).

Version notes: v0-v1 identical; v2 is flexible; v3 refuses topics over the controller
mutation quota (THROTTLING_QUOTA_EXCEEDED, KIP-599).
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
from strom.wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(
    broker: BrokerState, request: RequestContext, body: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    """ALTER on each topic: the others are TOPIC_AUTHORIZATION_FAILED."""
    refused = [
        t for t in body.topics
        if not allowed(broker, request, AclOperation.ALTER, ResourceType.TOPIC, t.name)
    ]  # fmt: skip
    if not refused:
        return await _grow(broker, request, body)
    kept = [t for t in body.topics if t not in refused]
    response = (
        await _grow(broker, request, CreatePartitionsRequest(
            topics=kept, timeout_ms=body.timeout_ms, validate_only=body.validate_only))
        if kept else CreatePartitionsResponse(results=[])
    )  # fmt: skip
    response.results += [
        Result(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        for t in refused
    ]
    return response


async def _grow(
    broker: BrokerState, request: RequestContext, body: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    """The topics the client's controller mutation quota admits, grown."""
    admitted, throttled, quota = admit(
        broker, request, 3, body.topics, lambda t: _added(broker, t)
    )
    if not throttled:
        response = await _grow_admitted(broker, request, body)
    elif admitted:
        response = await _grow_admitted(broker, request, CreatePartitionsRequest(
            topics=admitted, timeout_ms=body.timeout_ms, validate_only=body.validate_only))  # fmt: skip
    else:
        response = CreatePartitionsResponse(results=[])
    if quota is not None:
        failed = {r.name for r in response.results if r.error_code}
        settle(quota, request, sum(_added(broker, t) for t in admitted if t.name in failed))
    response.results += [
        Result(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE) for t in throttled
    ]
    return response


def _added(broker: BrokerState, topic: CreatePartitionsRequest.CreatePartitionsTopic) -> int:
    """The partitions growing `topic` adds (none if it is unknown or would not grow)."""
    known = broker.image.topic(topic.name)
    return max(0, topic.count - len(known.partitions)) if known is not None else 0


async def _grow_admitted(
    broker: BrokerState, request: RequestContext, body: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    if not broker.controller.is_active:
        return await forward(broker, request, body, CreatePartitionsResponse)

    async def grow() -> CreatePartitionsResponse:
        return await broker.controller.create_partitions(body, request.api_version)

    counts = Counter(t.name for t in body.topics)
    if not any(n == 1 for n in counts.values()):
        return await grow()
    response = await before_deadline(body.timeout_ms, grow)
    if response is None:
        return CreatePartitionsResponse(
            results=[Result(t.name, ErrorCode.REQUEST_TIMED_OUT, None) for t in body.topics]
        )
    return response
