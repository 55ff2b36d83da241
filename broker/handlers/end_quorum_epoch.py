"""EndQuorumEpoch (key 54): a resigning leader asks the voters to elect a successor.

Behavior:
- Answered only on a controller listener, by this node's Raft driver: the first preferred
  successor stands at once, the others after a back-off by their place. See docs/raft.md.
- A node running no Raft driver closes the connection; another cluster id is
  INCONSISTENT_CLUSTER_ID.

Version notes: v0 not flexible; v1 flexible, preferred candidates with directory ids
(KIP-853; read as the successor list).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.raft_rpc import answer
from strom.wire.messages.end_quorum_epoch import EndQuorumEpochRequest, EndQuorumEpochResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 54
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: EndQuorumEpochRequest
) -> EndQuorumEpochResponse:
    response = await answer(broker, request, body)
    assert isinstance(response, EndQuorumEpochResponse)
    return response
