"""FetchSnapshot (key 59): a lagging replica reads the leader's metadata snapshot in chunks.

Behavior:
- Answered only on a controller listener, by this node's Raft driver: the leader serves the
  chunk at `position` of the snapshot named (SNAPSHOT_NOT_FOUND for another one). See
  docs/raft.md.
- A node running no Raft driver closes the connection; another cluster id is
  INCONSISTENT_CLUSTER_ID.

Version notes: v0 flexible (KIP-630); v1 replica directory id and leader endpoints (KIP-853;
accepted, endpoints not sent yet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.raft_rpc import answer
from strom.wire.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 59
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(
    broker: BrokerState, request: RequestContext, body: FetchSnapshotRequest
) -> FetchSnapshotResponse:
    response = await answer(broker, request, body)
    assert isinstance(response, FetchSnapshotResponse)
    return response
