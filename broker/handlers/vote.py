"""Vote (key 52): a candidate, or a prospective (pre-vote, KIP-996), asks this voter for its vote.

Behavior:
- Answered only on a controller listener, by this node's Raft driver
  (`strom.broker.drivers.raft`), which hands it to the core: a vote is granted at most once per
  epoch, to a candidate whose log is at least as fresh, and only once the vote is on disk; a
  pre-vote changes nothing. See docs/raft.md.
- A node running no Raft driver closes the connection; another cluster id is
  INCONSISTENT_CLUSTER_ID.

Version notes: v0 flexible (KIP-595); v1 voter directory ids (KIP-853, accepted, not used);
v2 pre_vote (KIP-996).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.raft_rpc import answer
from strom.wire.messages.vote import VoteRequest, VoteResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 52
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(broker: BrokerState, request: RequestContext, body: VoteRequest) -> VoteResponse:
    response = await answer(broker, request, body)
    assert isinstance(response, VoteResponse)
    return response
