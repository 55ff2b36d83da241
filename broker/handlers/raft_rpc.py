"""What the Raft RPC handlers share: hand the request to this node's Raft driver, wait for
the core's answer, put it back on the wire.

Used by Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot and, on a CONTROLLER listener,
Fetch (of `__cluster_metadata`). Every node runs a Raft driver (the single node of `strom
serve` a one-voter quorum, which answers them as Kafka's standalone controller does); a state
without one (handler tests) refuses them by closing the connection. A request naming another
cluster id gets INCONSISTENT_CLUSTER_ID, as Kafka answers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from strom.coordinator.raft import wire
from strom.wire.apis import response_class
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.broker.drivers.raft import RaftDriver
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState


def driver(broker: BrokerState, request: RequestContext) -> RaftDriver:
    """This node's Raft driver; ProtocolError (the connection closes) when it runs none or
    has not loaded its log yet."""
    if broker.raft is None:
        raise ProtocolError(
            f"API key {request.api_key}: this node is not a member of a Raft controller quorum "
            f"(client {request.client_id!r})",
            ErrorCode.INVALID_REQUEST,
        )
    if broker.raft.core is None:
        # The listener opens before the Raft log is loaded: the peer retries, as after any
        # connection failure (Kafka's controller listener opens only once its log is loaded).
        raise ProtocolError(
            f"API key {request.api_key}: this node's Raft log is still loading; closing so "
            f"the peer retries (client {request.client_id!r})",
            ErrorCode.BROKER_NOT_AVAILABLE,
        )
    return broker.raft


async def answer(broker: BrokerState, request: RequestContext, body: Message) -> Message:
    """The core's response to one Raft request."""
    raft = driver(broker, request)
    cluster_id = getattr(body, "cluster_id", None)
    if cluster_id is not None and raft.cluster_id is not None and cluster_id != raft.cluster_id:
        refusal: Any = response_class(request.api_key)
        return refusal(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)  # type: ignore[no-any-return]
    core_request = wire.request_from_wire(body, request.correlation_id)
    try:
        response = await raft.answer(core_request)
    except trio.TooSlowError:
        raise ProtocolError(
            f"API key {request.api_key}: the Raft core gave no answer in time; closing so the "
            "peer retries",
            ErrorCode.REQUEST_TIMED_OUT,
        ) from None
    return wire.response_to_wire(response, raft.encoded)
