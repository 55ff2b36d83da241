"""Translation between the core's typed RPC values and Kafka's generated wire classes.

The driver encodes `request_to_wire(..., version)` at the version it negotiated and sends it with
`request.request_id` as the correlation id; it decodes the response and calls
`response_from_wire(wire_response, request)` with the request it sent (the wire does not echo
the request's fields, e.g. whether a vote was a pre-vote). Incoming requests go through
`request_from_wire(wire_request, correlation_id)`, their answers through `response_to_wire`.

Everything concerns the one partition `__cluster_metadata-0`. Log entries travel in Fetch
responses as the same v2 record batches the log holds on disk (`strom.storage.raft.raft_log`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from strom.coordinator.raft.core import QuorumInfo, ReplicaInfo
from strom.coordinator.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from strom.storage.raft.raft_log import decode_entries, encode_entries
from strom.storage.raft.raft_store import Entry, SnapshotId
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message
from strom.wire.messages import begin_quorum_epoch as bqe
from strom.wire.messages import describe_quorum as dq
from strom.wire.messages import end_quorum_epoch as eqe
from strom.wire.messages import fetch as fetch_wire
from strom.wire.messages import fetch_snapshot as fs
from strom.wire.messages import vote as vote_wire

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID(int=1)
"""Kafka's fixed topic id of `__cluster_metadata` (Uuid.METADATA_TOPIC_ID)."""
FETCH_PARTITION_MAX_BYTES = 1 << 20

_T = TypeVar("_T")


# --- requests -----------------------------------------------------------------------------


def request_to_wire(request: Request, dest: int, cluster_id: str | None, version: int) -> Message:
    """The wire form of a request the core sends to node `dest`, to encode at `version`.

    A pre-vote needs Vote v2; encoding one at an older version fails (the peer could not
    tell it from a real vote).
    """
    match request:
        case VoteRequest():
            return vote_wire.VoteRequest(
                cluster_id=cluster_id,
                voter_id=dest,
                topics=[
                    vote_wire.VoteRequest.TopicData(
                        METADATA_TOPIC,
                        [
                            vote_wire.VoteRequest.PartitionData(
                                partition_index=METADATA_PARTITION,
                                replica_epoch=request.epoch,
                                replica_id=request.candidate_id,
                                last_offset_epoch=request.last_epoch,
                                last_offset=request.end_offset,
                                pre_vote=request.pre_vote,
                            )
                        ],
                    )
                ],
            )
        case BeginQuorumEpochRequest():
            return bqe.BeginQuorumEpochRequest(
                cluster_id=cluster_id,
                voter_id=dest,
                topics=[
                    bqe.BeginQuorumEpochRequest.TopicData(
                        METADATA_TOPIC,
                        [
                            bqe.BeginQuorumEpochRequest.PartitionData(
                                partition_index=METADATA_PARTITION,
                                leader_id=request.leader_id,
                                leader_epoch=request.epoch,
                            )
                        ],
                    )
                ],
            )
        case EndQuorumEpochRequest():
            return eqe.EndQuorumEpochRequest(
                cluster_id=cluster_id,
                topics=[
                    eqe.EndQuorumEpochRequest.TopicData(
                        METADATA_TOPIC,
                        [
                            eqe.EndQuorumEpochRequest.PartitionData(
                                partition_index=METADATA_PARTITION,
                                leader_id=request.leader_id,
                                leader_epoch=request.epoch,
                                preferred_successors=list(request.preferred_successors),
                                preferred_candidates=[
                                    eqe.EndQuorumEpochRequest.ReplicaInfo(candidate_id=c)
                                    for c in request.preferred_successors
                                ],
                            )
                        ],
                    )
                ],
            )
        case FetchRequest():
            return fetch_wire.FetchRequest(
                cluster_id=cluster_id,
                replica_id=request.replica_id if version < 15 else -1,
                replica_state=fetch_wire.FetchRequest.ReplicaState(
                    replica_id=request.replica_id if version >= 15 else -1, replica_epoch=-1
                ),
                max_wait_ms=request.max_wait_ms,
                min_bytes=1,
                topics=[
                    fetch_wire.FetchRequest.FetchTopic(
                        topic=METADATA_TOPIC,
                        topic_id=METADATA_TOPIC_ID,
                        partitions=[
                            fetch_wire.FetchRequest.FetchPartition(
                                partition=METADATA_PARTITION,
                                current_leader_epoch=request.epoch,
                                fetch_offset=request.fetch_offset,
                                last_fetched_epoch=request.last_fetched_epoch,
                                log_start_offset=-1,
                                partition_max_bytes=FETCH_PARTITION_MAX_BYTES,
                            )
                        ],
                    )
                ],
            )
        case FetchSnapshotRequest():
            return fs.FetchSnapshotRequest(
                cluster_id=cluster_id,
                replica_id=request.replica_id,
                max_bytes=request.max_bytes,
                topics=[
                    fs.FetchSnapshotRequest.TopicSnapshot(
                        METADATA_TOPIC,
                        [
                            fs.FetchSnapshotRequest.PartitionSnapshot(
                                partition=METADATA_PARTITION,
                                current_leader_epoch=request.epoch,
                                snapshot_id=fs.FetchSnapshotRequest.SnapshotId(
                                    *request.snapshot_id
                                ),
                                position=request.position,
                            )
                        ],
                    )
                ],
            )
    raise TypeError(f"not a Raft request: {request!r}")


def _only(items: list[_T], what: str) -> _T:
    if len(items) != 1:
        raise ProtocolError(f"{what} must name exactly one partition of {METADATA_TOPIC}")
    return items[0]


def request_from_wire(message: Message, correlation_id: int) -> Request:
    """The core's view of a request received from the wire; ProtocolError if malformed."""
    if isinstance(message, vote_wire.VoteRequest):
        vp = _only(_only(message.topics, "Vote").partitions, "Vote")
        return VoteRequest(
            correlation_id,
            vp.replica_epoch,
            vp.replica_id,
            vp.last_offset_epoch,
            vp.last_offset,
            vp.pre_vote,
        )
    if isinstance(message, bqe.BeginQuorumEpochRequest):
        bp = _only(_only(message.topics, "BeginQuorumEpoch").partitions, "BeginQuorumEpoch")
        return BeginQuorumEpochRequest(correlation_id, bp.leader_epoch, bp.leader_id)
    if isinstance(message, eqe.EndQuorumEpochRequest):
        ep = _only(_only(message.topics, "EndQuorumEpoch").partitions, "EndQuorumEpoch")
        successors = tuple(ep.preferred_successors) or tuple(
            c.candidate_id for c in ep.preferred_candidates
        )
        return EndQuorumEpochRequest(correlation_id, ep.leader_epoch, ep.leader_id, successors)
    if isinstance(message, fetch_wire.FetchRequest):
        fp = _only(_only(message.topics, "Fetch").partitions, "Fetch")
        replica_id = message.replica_state.replica_id
        if replica_id < 0:
            replica_id = message.replica_id
        return FetchRequest(
            correlation_id,
            fp.current_leader_epoch,
            replica_id,
            fp.fetch_offset,
            fp.last_fetched_epoch,
            message.max_wait_ms,
        )
    if isinstance(message, fs.FetchSnapshotRequest):
        sp = _only(_only(message.topics, "FetchSnapshot").partitions, "FetchSnapshot")
        return FetchSnapshotRequest(
            correlation_id,
            sp.current_leader_epoch,
            message.replica_id,
            SnapshotId(sp.snapshot_id.end_offset, sp.snapshot_id.epoch),
            sp.position,
            message.max_bytes,
        )
    raise TypeError(f"not a Raft request: {type(message).__name__}")


def sender(request: Request) -> int:
    """The node a received request comes from, as its body names it."""
    match request:
        case VoteRequest():
            return request.candidate_id
        case BeginQuorumEpochRequest() | EndQuorumEpochRequest():
            return request.leader_id
        case FetchRequest() | FetchSnapshotRequest():
            return request.replica_id


# --- responses ----------------------------------------------------------------------------


def response_to_wire(
    response: Response,
    encode: Callable[[tuple[Entry, ...]], bytes] = encode_entries,
) -> Message:
    """The wire form of a response the core sends; `encode` turns a Fetch answer's entries into
    batches (a driver passes one that caches: `storage.raft.raft_log.EncodedEntries`)."""
    match response:
        case VoteResponse():
            return vote_wire.VoteResponse(
                topics=[
                    vote_wire.VoteResponse.TopicData(
                        METADATA_TOPIC,
                        [
                            vote_wire.VoteResponse.PartitionData(
                                partition_index=METADATA_PARTITION,
                                error_code=response.error,
                                leader_id=response.leader_id,
                                leader_epoch=response.epoch,
                                vote_granted=response.granted,
                            )
                        ],
                    )
                ]
            )
        case BeginQuorumEpochResponse():
            return bqe.BeginQuorumEpochResponse(
                topics=[
                    bqe.BeginQuorumEpochResponse.TopicData(
                        METADATA_TOPIC,
                        [
                            bqe.BeginQuorumEpochResponse.PartitionData(
                                partition_index=METADATA_PARTITION,
                                error_code=response.error,
                                leader_id=response.leader_id,
                                leader_epoch=response.epoch,
                            )
                        ],
                    )
                ]
            )
        case EndQuorumEpochResponse():
            return eqe.EndQuorumEpochResponse(
                topics=[
                    eqe.EndQuorumEpochResponse.TopicData(
                        METADATA_TOPIC,
                        [
                            eqe.EndQuorumEpochResponse.PartitionData(
                                partition_index=METADATA_PARTITION,
                                error_code=response.error,
                                leader_id=response.leader_id,
                                leader_epoch=response.epoch,
                            )
                        ],
                    )
                ]
            )
        case FetchResponse():
            diverging = response.diverging or SnapshotId(-1, -1)
            snapshot_id = response.snapshot_id or SnapshotId(-1, -1)
            return fetch_wire.FetchResponse(
                responses=[
                    fetch_wire.FetchResponse.FetchableTopicResponse(
                        topic=METADATA_TOPIC,
                        topic_id=METADATA_TOPIC_ID,
                        partitions=[
                            fetch_wire.FetchResponse.PartitionData(
                                partition_index=METADATA_PARTITION,
                                error_code=response.error,
                                high_watermark=response.high_watermark,
                                log_start_offset=response.log_start_offset,
                                diverging_epoch=fetch_wire.FetchResponse.EpochEndOffset(
                                    epoch=diverging.epoch, end_offset=diverging.end_offset
                                ),
                                current_leader=fetch_wire.FetchResponse.LeaderIdAndEpoch(
                                    leader_id=response.leader_id, leader_epoch=response.epoch
                                ),
                                snapshot_id=fetch_wire.FetchResponse.SnapshotId(
                                    end_offset=snapshot_id.end_offset, epoch=snapshot_id.epoch
                                ),
                                records=encode(response.entries),
                            )
                        ],
                    )
                ]
            )
        case FetchSnapshotResponse():
            return fs.FetchSnapshotResponse(
                topics=[
                    fs.FetchSnapshotResponse.TopicSnapshot(
                        METADATA_TOPIC,
                        [
                            fs.FetchSnapshotResponse.PartitionSnapshot(
                                index=METADATA_PARTITION,
                                error_code=response.error,
                                snapshot_id=fs.FetchSnapshotResponse.SnapshotId(
                                    *response.snapshot_id
                                ),
                                current_leader=fs.FetchSnapshotResponse.LeaderIdAndEpoch(
                                    leader_id=response.leader_id, leader_epoch=response.epoch
                                ),
                                size=response.size,
                                position=response.position,
                                unaligned_records=response.data,
                            )
                        ],
                    )
                ]
            )
    raise TypeError(f"not a Raft response: {response!r}")


def _present(end_offset: int, epoch: int) -> SnapshotId | None:
    return SnapshotId(end_offset, epoch) if end_offset >= 0 and epoch >= 0 else None


def response_from_wire(message: Message, request: Request) -> Response:
    """The core's view of the response to `request`; ProtocolError if malformed."""
    top_error = int(getattr(message, "error_code", ErrorCode.NONE))
    match request:
        case VoteRequest():
            assert isinstance(message, vote_wire.VoteResponse)
            if top_error and not message.topics:
                return VoteResponse(request.request_id, top_error, -1, -1, False, request.pre_vote)
            vp = _only(_only(message.topics, "Vote").partitions, "Vote")
            return VoteResponse(
                request.request_id,
                top_error or vp.error_code,
                vp.leader_epoch,
                vp.leader_id,
                vp.vote_granted,
                request.pre_vote,
            )
        case BeginQuorumEpochRequest():
            assert isinstance(message, bqe.BeginQuorumEpochResponse)
            if top_error and not message.topics:
                return BeginQuorumEpochResponse(request.request_id, top_error, -1, -1)
            bp = _only(_only(message.topics, "BeginQuorumEpoch").partitions, "BeginQuorumEpoch")
            return BeginQuorumEpochResponse(
                request.request_id, top_error or bp.error_code, bp.leader_epoch, bp.leader_id
            )
        case EndQuorumEpochRequest():
            assert isinstance(message, eqe.EndQuorumEpochResponse)
            if top_error and not message.topics:
                return EndQuorumEpochResponse(request.request_id, top_error, -1, -1)
            ep = _only(_only(message.topics, "EndQuorumEpoch").partitions, "EndQuorumEpoch")
            return EndQuorumEpochResponse(
                request.request_id, top_error or ep.error_code, ep.leader_epoch, ep.leader_id
            )
        case FetchRequest():
            assert isinstance(message, fetch_wire.FetchResponse)
            if top_error and not message.responses:
                return FetchResponse(request.request_id, top_error, -1, -1, 0, 0)
            fp = _only(_only(message.responses, "Fetch").partitions, "Fetch")
            return FetchResponse(
                request.request_id,
                top_error or fp.error_code,
                fp.current_leader.leader_epoch,
                fp.current_leader.leader_id,
                fp.high_watermark,
                fp.log_start_offset,
                tuple(decode_entries(fp.records)),
                _present(fp.diverging_epoch.end_offset, fp.diverging_epoch.epoch),
                _present(fp.snapshot_id.end_offset, fp.snapshot_id.epoch),
            )
        case FetchSnapshotRequest():
            assert isinstance(message, fs.FetchSnapshotResponse)
            if top_error and not message.topics:
                return FetchSnapshotResponse(
                    request.request_id, top_error, -1, -1, request.snapshot_id, 0, 0, b""
                )
            sp = _only(_only(message.topics, "FetchSnapshot").partitions, "FetchSnapshot")
            return FetchSnapshotResponse(
                request.request_id,
                top_error or sp.error_code,
                sp.current_leader.leader_epoch,
                sp.current_leader.leader_id,
                SnapshotId(sp.snapshot_id.end_offset, sp.snapshot_id.epoch),
                sp.size,
                sp.position,
                bytes(sp.unaligned_records or b""),
            )
    raise TypeError(f"not a Raft request: {request!r}")


def describe_quorum_response(info: QuorumInfo) -> dq.DescribeQuorumResponse:
    """DescribeQuorum's answer from `RaftCore.describe` (the leader's view)."""

    def state(replica: ReplicaInfo) -> dq.DescribeQuorumResponse.ReplicaState:
        return dq.DescribeQuorumResponse.ReplicaState(
            replica_id=replica.replica_id,
            log_end_offset=replica.log_end_offset,
            last_fetch_timestamp=replica.last_fetch_ms,
            last_caught_up_timestamp=replica.last_caught_up_ms,
        )

    error = ErrorCode.NONE if info.voters else ErrorCode.NOT_LEADER_OR_FOLLOWER
    return dq.DescribeQuorumResponse(
        topics=[
            dq.DescribeQuorumResponse.TopicData(
                METADATA_TOPIC,
                [
                    dq.DescribeQuorumResponse.PartitionData(
                        partition_index=METADATA_PARTITION,
                        error_code=error,
                        error_message=None,
                        leader_id=info.leader_id,
                        leader_epoch=info.leader_epoch,
                        high_watermark=info.high_watermark,
                        current_voters=[state(v) for v in info.voters],
                        observers=[state(o) for o in info.observers],
                    )
                ],
            )
        ]
    )
