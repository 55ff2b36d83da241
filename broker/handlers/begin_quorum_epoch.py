"""BeginQuorumEpoch (key 53): a new leader tells the voters of its epoch.

Behavior:
- Answered only on a controller listener, by this node's Raft driver: the voter follows the
  leader of that epoch (an older epoch is FENCED_LEADER_EPOCH). See docs/raft.md.
- A node running no Raft driver closes the connection; another cluster id is
  INCONSISTENT_CLUSTER_ID.

Version notes: v0 not flexible; v1 flexible, voter directory ids and leader endpoints
(KIP-853; accepted, endpoints not sent yet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.raft_rpc import answer
from strom.wire.messages.begin_quorum_epoch import BeginQuorumEpochRequest, BeginQuorumEpochResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 53
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: BeginQuorumEpochRequest
) -> BeginQuorumEpochResponse:
    response = await answer(broker, request, body)
    assert isinstance(response, BeginQuorumEpochResponse)
    return response
