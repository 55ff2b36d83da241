"""FindCoordinator (key 10).

Behavior:
- Key type 0 (group) answers the broker leading the group's
  `__consumer_offsets` partition (`GroupDriver.partition_for`), with its
  endpoint on the listener the request arrived on, as Kafka does; the first
  request creates `__consumer_offsets` through the controller (with
  `offsets.topic.num.partitions` partitions, compacted), as Kafka creates it on
  first use. A partition with no leader usable on that listener (offline, its
  leader fenced or without the listener) is COORDINATOR_NOT_AVAILABLE, and
  clients retry.
- Key type 1 (transaction) likewise: the leader of the transactional id's
  `__transaction_state` partition (`abs(javaHashCode(transactional.id)) %
  transaction.state.log.num.partitions`, Kafka's hash), the topic created on first
  use with `transaction.state.log.*` settings. Other key types (share groups) are
  INVALID_REQUEST.
- If the internal topic cannot be created the key gets
  COORDINATOR_NOT_AVAILABLE.

Success carries error message "NONE" before v4 and "" in v4+ `coordinators`, as
Kafka 4.1 answers (found by differential testing).

Version notes: v1 key type, throttle time and error message; v3 flexible; v4
batches keys (`coordinator_keys` in, `coordinators` out); v5-v6 no change to
what Strom answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.partition_leadership import leadership
from strom.broker.drivers.topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from strom.broker.handlers.group_common import group_driver
from strom.broker.handlers.txn_common import txn_driver
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
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
    if key_type == GROUP and not allowed(
        broker, request, AclOperation.DESCRIBE, ResourceType.GROUP, key
    ):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error,
                           error_message=None)  # fmt: skip
    if key_type == TRANSACTION and not allowed(
        broker, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error,
                           error_message=None)  # fmt: skip
    error = await _ensure_topic(broker, key_type)
    endpoint = None
    if error == ErrorCode.NONE:
        endpoint = _coordinator(broker, request.listener, key_type, key)
        if endpoint is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error != ErrorCode.NONE or endpoint is None:
        return Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=error, error_message=_message(error)
        )
    node_id, host, port = endpoint
    return Coordinator(
        key=key,
        node_id=node_id,
        host=host,
        port=port,
        error_code=ErrorCode.NONE,
        error_message="",  # v4+ keys: Kafka answers an empty message, not "NONE"
    )


def _coordinator(
    broker: BrokerState, listener: str, key_type: int, key: str
) -> tuple[int, str, int] | None:
    """(node id, host, port) of the key's coordinator on `listener`; None if it has none."""
    own = next((e for e in broker.endpoints if e.name == listener), None)
    if key_type == GROUP:
        groups = group_driver(broker)
        if groups is None:
            return None
        name, index = CONSUMER_OFFSETS, groups.partition_for(key)
    else:
        transactions = txn_driver(broker)
        if transactions is None:
            return None
        name, index = TRANSACTION_STATE, transactions.partition_for(key)
    image = broker.image
    topic = image.topic(name)
    partition = None if topic is None else topic.partition(index)
    if topic is None or partition is None:
        return None
    leader, _ = leadership(broker, image, topic.topic_id, partition, listener)
    if leader < 0:
        return None  # offline, fenced or not on this listener: clients retry
    if leader == broker.node_id:
        return None if own is None else (leader, own.host, own.port)
    registration = image.broker(leader)
    found = None if registration is None else registration.endpoint(listener)
    return None if found is None else (leader, found.host, found.port)


async def _ensure_topic(broker: BrokerState, key_type: int) -> ErrorCode:
    if key_type == GROUP:
        driver = group_driver(broker)
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE if driver is None else await driver.ensure_topic()
        )
    if key_type == TRANSACTION:
        transactions = txn_driver(broker)
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE
            if transactions is None
            else await transactions.ensure_topic()
        )
    return ErrorCode.INVALID_REQUEST


def _message(error: ErrorCode) -> str:
    if error == ErrorCode.INVALID_REQUEST:
        return "Unsupported coordinator key type"
    return "The coordinator is not available."
