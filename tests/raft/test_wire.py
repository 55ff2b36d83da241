"""The core's messages survive a trip through Kafka's real encoders and decoders."""

from __future__ import annotations

import pytest

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
from strom.coordinator.raft.wire import (
    describe_quorum_response,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
    sender,
)
from strom.storage.raft.raft_store import Entry, SnapshotId
from strom.wire.errors import ProtocolError
from strom.wire.messages.describe_quorum import DescribeQuorumResponse

ENTRIES = (
    Entry(10, 3, b"a"),
    Entry(11, 3, b"bb"),
    Entry(12, 4, b"", control=True),
    Entry(13, 4, b"c" * 300),
)

# (request, its response, the versions both survive whole)
EXCHANGES: list[tuple[Request, Response, range]] = [
    (
        VoteRequest(41, 7, 2, 6, 120, pre_vote=True),
        VoteResponse(41, 0, 7, 3, True, pre_vote=True),
        range(2, 3),
    ),
    (
        VoteRequest(42, 7, 2, 6, 120, pre_vote=False),
        VoteResponse(42, 74, 8, -1, False, pre_vote=False),
        range(3),
    ),
    (
        BeginQuorumEpochRequest(43, 9, 1),
        BeginQuorumEpochResponse(43, 0, 9, 1),
        range(2),
    ),
    (
        EndQuorumEpochRequest(44, 9, 1, (3, 2)),
        EndQuorumEpochResponse(44, 0, 9, 1),
        range(2),
    ),
    (
        FetchRequest(45, 9, 2, 10, 3, 500),
        FetchResponse(45, 0, 9, 1, 12, 5, ENTRIES),
        range(13, 18),
    ),
    (
        FetchRequest(46, 9, 2, 20, 5, 0),
        FetchResponse(46, 0, 9, 1, 12, 5, (), SnapshotId(15, 4)),
        range(13, 18),
    ),
    (
        FetchRequest(47, 9, 100, 0, 0, 500),
        FetchResponse(47, 0, 9, 1, 12, 5, (), None, SnapshotId(40, 8)),
        range(13, 18),
    ),
    (
        FetchRequest(48, 8, 2, 10, 3, 500),
        FetchResponse(48, 74, 9, 1, 0, 0),
        range(13, 18),
    ),
    (
        FetchSnapshotRequest(49, 9, 2, SnapshotId(40, 8), 4096, 1 << 20),
        FetchSnapshotResponse(49, 0, 9, 1, SnapshotId(40, 8), 9000, 4096, b"chunk"),
        range(2),
    ),
]


@pytest.mark.parametrize(("request_", "response", "versions"), EXCHANGES)
def test_requests_and_responses_round_trip(
    request_: Request, response: Response, versions: range
) -> None:
    for version in versions:
        wire_request = request_to_wire(request_, 3, "strom-test-cluster", version)
        decoded = type(wire_request).decode(wire_request.encode(version), version)
        assert request_from_wire(decoded, request_.request_id) == request_, version
        assert sender(request_from_wire(decoded, 0)) == sender(request_)

        wire_response = response_to_wire(response)
        back = type(wire_response).decode(wire_response.encode(version), version)
        assert response_from_wire(back, request_) == response, version


def test_a_vote_names_the_voter_it_is_for() -> None:
    wire_request = request_to_wire(VoteRequest(1, 2, 3, 1, 5, False), 4, None, 2)
    decoded = type(wire_request).decode(wire_request.encode(2), 2)
    assert getattr(decoded, "voter_id") == 4  # noqa: B009


def test_describe_quorum_reports_the_leaders_view() -> None:
    info = QuorumInfo(
        1,
        5,
        77,
        (ReplicaInfo(1, 80, 1000, 1000), ReplicaInfo(2, 77, 990, 900)),
        (ReplicaInfo(100, 60, 980, -1),),
    )
    for version in range(3):
        data = describe_quorum_response(info).encode(version)
        decoded = DescribeQuorumResponse.decode(data, version)
        partition = decoded.topics[0].partitions[0]
        assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (1, 5, 77)
        assert [v.replica_id for v in partition.current_voters] == [1, 2]
        assert [o.log_end_offset for o in partition.observers] == [60]
        if version >= 1:
            assert partition.current_voters[1].last_caught_up_timestamp == 900


def test_a_pre_vote_cannot_be_sent_at_a_version_without_it() -> None:
    wire_request = request_to_wire(VoteRequest(1, 2, 3, 1, 5, True), 4, None, 1)
    with pytest.raises(ProtocolError):
        wire_request.encode(1)
