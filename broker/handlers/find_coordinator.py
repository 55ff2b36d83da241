"""FindCoordinator (key 10).

Behavior:
- Key type 0 (group) answers this node for any group id; the first request
  creates `__consumer_offsets` through the controller (with
  `offsets.topic.num.partitions` partitions, compacted), as Kafka creates it
  on first use. Key type 1 (transaction) likewise creates
  `__transaction_state`. Other key types (share groups) are INVALID_REQUEST.
- The coordinator's endpoint is this broker's on the listener the request
  arrived on. If the internal topic cannot be created the key gets
  COORDINATOR_NOT_AVAILABLE, and clients retry.

Success carries error message "NONE" before v4 and "" in v4+ `coordinators`, as
Kafka 4.1 answers (found by differential testing).

Version notes: v1 key type, throttle time and error message; v3 flexible; v4
batches keys (`coordinator_keys` in, `coordinators` out); v5-v6 no change to
what Strom answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.drivers.topics import TRANSACTION_STATE, create_internal_topic, internal_topic
from strom.broker.handlers.group_common import group_driver
from strom.wire.errors import ErrorCode
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION = 0, 1
Coordinator = FindCoordinatorResponse.Coordinator


async def handle(
    broker: BrokerState, request: RequestContext, body: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    version = request.api_version
    keys = list(body.coordinator_keys) if version >= 4 else [body.key]
    found = [await _find(broker, request, body.key_type, key) for key in keys]
    if version >= 4:
        return FindCoordinatorResponse(coordinators=found)
    one = found[0]
    return FindCoordinatorResponse(
        error_code=one.error_code,
        error_message=one.error_message or "NONE",  # Errors.NONE.message() before v4
        node_id=one.node_id,
        host=one.host,
        port=one.port,
    )


async def _find(
    broker: BrokerState, request: RequestContext, key_type: int, key: str
) -> Coordinator:
    error = await _ensure_topic(broker, key_type)
    endpoint = next((e for e in broker.endpoints if e.name == request.listener), None)
    if error == ErrorCode.NONE and endpoint is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error != ErrorCode.NONE or endpoint is None:
        return Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=error, error_message=_message(error)
        )
    return Coordinator(
        key=key,
        node_id=broker.node_id,
        host=endpoint.host,
        port=endpoint.port,
        error_code=ErrorCode.NONE,
        error_message="",  # v4+ keys: Kafka answers an empty message, not "NONE"
    )


async def _ensure_topic(broker: BrokerState, key_type: int) -> ErrorCode:
    if key_type == GROUP:
        driver = group_driver(broker)
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE if driver is None else await driver.ensure_topic()
        )
    if key_type == TRANSACTION:
        topic = internal_topic(broker.config, TRANSACTION_STATE)
        return await create_internal_topic(broker.controller, topic)
    return ErrorCode.INVALID_REQUEST


def _message(error: ErrorCode) -> str:
    if error == ErrorCode.INVALID_REQUEST:
        return "Unsupported coordinator key type"
    return "The coordinator is not available."
