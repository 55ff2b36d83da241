"""The Raft RPCs as small typed values: what the core takes in and sends out.

One class per Kafka request and response (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch on the
metadata partition, FetchSnapshot), holding only what the core reads. `strom.coordinator.raft.wire`
translates them to and from the generated wire classes; the simulator passes them as they are.

`request_id` pairs a response with its request: the driver uses it as the Kafka correlation id
and sets it on the response it decodes. Responses also carry the fields of their request the core
needs to interpret them (the wire does not echo them; the driver fills them from the request it
sent, see `wire.response_from_wire`). Error codes are Kafka's (`strom.wire.errors.ErrorCode`).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.storage.raft.raft_store import Entry, SnapshotId

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    request_id: int
    epoch: int
    """The candidate's epoch; for a pre-vote, the prospective's current (not bumped) epoch."""
    candidate_id: int
    last_epoch: int
    end_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    request_id: int
    error: int
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    request_id: int
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    request_id: int
    error: int
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    request_id: int
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    request_id: int
    error: int
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    request_id: int
    epoch: int
    """The fetcher's current leader epoch."""
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    request_id: int
    error: int
    epoch: int
    leader_id: int
    high_watermark: int
    log_start_offset: int
    entries: tuple[Entry, ...] = ()
    diverging: SnapshotId | None = None
    """Set when the fetch position diverges: (end offset, epoch) of the leader's log there."""
    snapshot_id: SnapshotId | None = None
    """Set when the fetch offset is below the log start: fetch this snapshot instead."""


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    request_id: int
    epoch: int
    replica_id: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    request_id: int
    error: int
    epoch: int
    leader_id: int
    snapshot_id: SnapshotId
    size: int
    position: int
    data: bytes


Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
RaftMessage = Request | Response
