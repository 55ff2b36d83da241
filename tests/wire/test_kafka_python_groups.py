"""kafka-python <-> Strom: the consumer-group APIs, every common version.

JoinGroup 2-9, SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit
2-9, OffsetFetch 1-9. kafka-python 3.0.12 also has JoinGroup 0-1 (which Strom,
following Kafka 4, no longer has), OffsetCommit 10 and OffsetFetch 10 (topic
ids, newer than Strom's definitions); those are not covered.
"""

from __future__ import annotations

from typing import Any

import pytest

from strom.wire.messages import heartbeat as s_heartbeat
from strom.wire.messages import join_group as s_join_group
from strom.wire.messages import leave_group as s_leave_group
from strom.wire.messages import offset_commit as s_offset_commit
from strom.wire.messages import offset_fetch as s_offset_fetch
from strom.wire.messages import sync_group as s_sync_group
from tests.wire.kp_helpers import (
    ApiCase,
    case_id,
    kp_consumer,
    kp_send,
    run_request_case,
    run_response_case,
    strom_body,
)

JoinGroupRequest = kp_consumer.JoinGroupRequest
JoinGroupResponse = kp_consumer.JoinGroupResponse
SyncGroupRequest = kp_consumer.SyncGroupRequest
SyncGroupResponse = kp_consumer.SyncGroupResponse
HeartbeatRequest = kp_consumer.HeartbeatRequest
HeartbeatResponse = kp_consumer.HeartbeatResponse
LeaveGroupRequest = kp_consumer.LeaveGroupRequest
LeaveGroupResponse = kp_consumer.LeaveGroupResponse
OffsetCommitRequest = kp_consumer.OffsetCommitRequest
OffsetCommitResponse = kp_consumer.OffsetCommitResponse
OffsetFetchRequest = kp_consumer.OffsetFetchRequest
OffsetFetchResponse = kp_consumer.OffsetFetchResponse

GROUP = "grøup-中"
MEMBER = "consumer-ü-1-5f3c"
INSTANCE = "instance-β"
SUBSCRIPTION = b"\x00\x03\x00\x00\x00\x01\x00\x05t\xc3\xb8pic\xff\xff\xff\xff"
ASSIGNMENT = b"\x00\x03\x00\x00\x00\x01\x00\x02t2\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x07"

# --- JoinGroup ------------------------------------------------------------------


def kp_join_group_request(v: int) -> Any:
    return JoinGroupRequest(
        version=v,
        group_id=GROUP,
        session_timeout_ms=45_000,
        rebalance_timeout_ms=300_000,
        member_id=MEMBER if v % 2 else "",
        group_instance_id=INSTANCE if v % 2 else None,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION),
            JoinGroupRequest.JoinGroupRequestProtocol(name="roundrobin-ü", metadata=b""),
        ],
        reason="rejoin ✓" if v % 2 else None,
    )


def strom_join_group_response(v: int) -> s_join_group.JoinGroupResponse:
    return s_join_group.JoinGroupResponse(
        throttle_time_ms=5,
        error_code=0,
        generation_id=12,
        protocol_type=None if v == 8 else "consumer",
        protocol_name=None if v == 8 else "range",
        leader=MEMBER,
        skip_assignment=True,
        member_id=MEMBER,
        members=[
            s_join_group.JoinGroupResponse.JoinGroupResponseMember(
                member_id=MEMBER, group_instance_id=INSTANCE, metadata=SUBSCRIPTION
            ),
            s_join_group.JoinGroupResponse.JoinGroupResponseMember(
                member_id="m-2", group_instance_id=None, metadata=b""
            ),
        ],
    )


def check_join_group_request(body: Any, v: int) -> None:
    assert (body.group_id, body.session_timeout_ms, body.rebalance_timeout_ms) == (
        GROUP,
        45_000,
        300_000,
    )
    assert body.member_id == (MEMBER if v % 2 else "")
    assert [(p.name, p.metadata) for p in body.protocols] == [
        ("range", SUBSCRIPTION),
        ("roundrobin-ü", b""),
    ]
    assert body.group_instance_id == (INSTANCE if v >= 5 and v % 2 else None)
    assert body.reason == ("rejoin ✓" if v >= 8 and v % 2 else None)


def check_join_group_response(got: Any, v: int) -> None:
    assert (got.throttle_time_ms, got.error_code, got.generation_id) == (5, 0, 12)
    assert (got.leader, got.member_id) == (MEMBER, MEMBER)
    assert got.protocol_name == (None if v == 8 else "range")
    assert [(m.member_id, m.metadata) for m in got.members] == [
        (MEMBER, SUBSCRIPTION),
        ("m-2", b""),
    ]
    if v >= 5:
        assert [m.group_instance_id for m in got.members] == [INSTANCE, None]
    if v >= 7:
        assert got.protocol_type == (None if v == 8 else "consumer")
    if v >= 9:
        assert got.skip_assignment is True


JOIN_GROUP = ApiCase(
    "JoinGroup",
    JoinGroupRequest,
    JoinGroupResponse,
    range(2, 10),
    kp_join_group_request,
    strom_join_group_response,
    check_join_group_request,
    check_join_group_response,
)

# --- SyncGroup ------------------------------------------------------------------


def kp_sync_group_request(v: int) -> Any:
    return SyncGroupRequest(
        version=v,
        group_id=GROUP,
        generation_id=-7,
        member_id=MEMBER,
        group_instance_id=None if v % 2 else INSTANCE,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=MEMBER, assignment=ASSIGNMENT),
            SyncGroupRequest.SyncGroupRequestAssignment(member_id="m-2", assignment=b""),
        ],
    )


def strom_sync_group_response(v: int) -> s_sync_group.SyncGroupResponse:
    return s_sync_group.SyncGroupResponse(
        throttle_time_ms=9,
        error_code=27,
        protocol_type="consumer",
        protocol_name="range-ü",
        assignment=ASSIGNMENT,
    )


def check_sync_group_request(body: Any, v: int) -> None:
    assert (body.group_id, body.generation_id, body.member_id) == (GROUP, -7, MEMBER)
    assert [(a.member_id, a.assignment) for a in body.assignments] == [
        (MEMBER, ASSIGNMENT),
        ("m-2", b""),
    ]
    assert body.group_instance_id == (INSTANCE if v >= 3 and not v % 2 else None)
    assert (body.protocol_type, body.protocol_name) == (
        ("consumer", "range") if v >= 5 else (None, None)
    )


def check_sync_group_response(got: Any, v: int) -> None:
    assert (got.error_code, got.assignment) == (27, ASSIGNMENT)
    if v >= 1:
        assert got.throttle_time_ms == 9
    if v >= 5:
        assert (got.protocol_type, got.protocol_name) == ("consumer", "range-ü")


SYNC_GROUP = ApiCase(
    "SyncGroup",
    SyncGroupRequest,
    SyncGroupResponse,
    range(6),
    kp_sync_group_request,
    strom_sync_group_response,
    check_sync_group_request,
    check_sync_group_response,
)

# --- Heartbeat ------------------------------------------------------------------


def kp_heartbeat_request(v: int) -> Any:
    return HeartbeatRequest(
        version=v,
        group_id=GROUP,
        generation_id=2**31 - 1,
        member_id=MEMBER,
        group_instance_id=INSTANCE,
    )


def strom_heartbeat_response(v: int) -> s_heartbeat.HeartbeatResponse:
    return s_heartbeat.HeartbeatResponse(throttle_time_ms=100, error_code=27)


def check_heartbeat_request(body: Any, v: int) -> None:
    assert (body.group_id, body.generation_id, body.member_id) == (GROUP, 2**31 - 1, MEMBER)
    assert body.group_instance_id == (INSTANCE if v >= 3 else None)


def check_heartbeat_response(got: Any, v: int) -> None:
    assert got.error_code == 27
    assert got.throttle_time_ms == (100 if v >= 1 else 0)


HEARTBEAT = ApiCase(
    "Heartbeat",
    HeartbeatRequest,
    HeartbeatResponse,
    range(5),
    kp_heartbeat_request,
    strom_heartbeat_response,
    check_heartbeat_request,
    check_heartbeat_response,
)

# --- LeaveGroup -----------------------------------------------------------------


def kp_leave_group_request(v: int) -> Any:
    return LeaveGroupRequest(
        version=v,
        group_id=GROUP,
        member_id=MEMBER,
        members=[
            LeaveGroupRequest.MemberIdentity(
                member_id=MEMBER, group_instance_id=INSTANCE, reason="bye ✓"
            ),
            LeaveGroupRequest.MemberIdentity(
                member_id="", group_instance_id="instance-2", reason=None
            ),
        ],
    )


def strom_leave_group_response(v: int) -> s_leave_group.LeaveGroupResponse:
    return s_leave_group.LeaveGroupResponse(
        throttle_time_ms=4,
        error_code=0,
        members=[
            s_leave_group.LeaveGroupResponse.MemberResponse(
                member_id=MEMBER, group_instance_id=INSTANCE, error_code=0
            ),
            s_leave_group.LeaveGroupResponse.MemberResponse(
                member_id="m-2", group_instance_id=None, error_code=25
            ),
        ],
    )


def check_leave_group_request(body: Any, v: int) -> None:
    assert body.group_id == GROUP
    if v <= 2:
        assert body.member_id == MEMBER
        assert body.members == []
    else:
        assert body.member_id == ""
        assert [(m.member_id, m.group_instance_id) for m in body.members] == [
            (MEMBER, INSTANCE),
            ("", "instance-2"),
        ]
        assert [m.reason for m in body.members] == (["bye ✓", None] if v >= 5 else [None, None])


def check_leave_group_response(got: Any, v: int) -> None:
    assert got.error_code == 0
    if v >= 1:
        assert got.throttle_time_ms == 4
    if v >= 3:
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in got.members] == [
            (MEMBER, INSTANCE, 0),
            ("m-2", None, 25),
        ]


LEAVE_GROUP = ApiCase(
    "LeaveGroup",
    LeaveGroupRequest,
    LeaveGroupResponse,
    range(6),
    kp_leave_group_request,
    strom_leave_group_response,
    check_leave_group_request,
    check_leave_group_response,
)

# --- OffsetCommit ---------------------------------------------------------------


def kp_offset_commit_request(v: int) -> Any:
    return OffsetCommitRequest(
        version=v,
        group_id=GROUP,
        generation_id_or_member_epoch=12,
        member_id=MEMBER,
        group_instance_id=INSTANCE if v % 2 else None,
        retention_time_ms=86_400_000,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name="tøpic-中",
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=1_234_567_890_123,
                        committed_leader_epoch=7,
                        committed_metadata="meta-ü",
                    ),
                    OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=1,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ],
            ),
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name="t2",
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=5,
                        committed_offset=0,
                        committed_leader_epoch=0,
                        committed_metadata="",
                    ),
                ],
            ),
        ],
    )


def strom_offset_commit_response(v: int) -> s_offset_commit.OffsetCommitResponse:
    return s_offset_commit.OffsetCommitResponse(
        throttle_time_ms=6,
        topics=[
            s_offset_commit.OffsetCommitResponse.OffsetCommitResponseTopic(
                name="tøpic-中",
                partitions=[
                    s_offset_commit.OffsetCommitResponse.OffsetCommitResponsePartition(0, 0),
                    s_offset_commit.OffsetCommitResponse.OffsetCommitResponsePartition(1, 22),
                ],
            ),
            s_offset_commit.OffsetCommitResponse.OffsetCommitResponseTopic(
                name="t2",
                partitions=[
                    s_offset_commit.OffsetCommitResponse.OffsetCommitResponsePartition(5, -1)
                ],
            ),
        ],
    )


def check_offset_commit_request(body: Any, v: int) -> None:
    assert (body.group_id, body.generation_id_or_member_epoch, body.member_id) == (
        GROUP,
        12,
        MEMBER,
    )
    p0, p1 = body.topics[0].partitions
    assert (p0.partition_index, p0.committed_offset, p0.committed_metadata) == (
        0,
        1_234_567_890_123,
        "meta-ü",
    )
    assert (p1.committed_offset, p1.committed_metadata) == (-1, None)
    assert body.topics[1].partitions[0].committed_metadata == ""
    assert body.retention_time_ms == (86_400_000 if v <= 4 else -1)
    assert p0.committed_leader_epoch == (7 if v >= 6 else -1)
    assert body.group_instance_id == (INSTANCE if v >= 7 and v % 2 else None)


def check_offset_commit_response(got: Any, v: int) -> None:
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in got.topics
    ] == [
        ("tøpic-中", [(0, 0), (1, 22)]),
        ("t2", [(5, -1)]),
    ]
    assert got.throttle_time_ms == (6 if v >= 3 else 0)


OFFSET_COMMIT = ApiCase(
    "OffsetCommit",
    OffsetCommitRequest,
    OffsetCommitResponse,
    range(2, 10),
    kp_offset_commit_request,
    strom_offset_commit_response,
    check_offset_commit_request,
    check_offset_commit_response,
)

# --- OffsetFetch ----------------------------------------------------------------


def kp_offset_fetch_request(v: int) -> Any:
    GT = OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics
    return OffsetFetchRequest(
        version=v,
        group_id=GROUP,
        topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(
                name="tøpic-中", partition_indexes=[0, 1, 2**31 - 1]
            ),
            OffsetFetchRequest.OffsetFetchRequestTopic(name="t2", partition_indexes=[]),
        ],
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=GROUP,
                member_id=MEMBER,
                member_epoch=5,
                topics=[GT(name="tøpic-中", partition_indexes=[0, 1])],
            ),
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="g-2", member_id=None, member_epoch=-1, topics=None
            ),
        ],
        require_stable=True,
    )


def strom_offset_fetch_response(v: int) -> s_offset_fetch.OffsetFetchResponse:
    GP = s_offset_fetch.OffsetFetchResponse.OffsetFetchResponsePartitions
    return s_offset_fetch.OffsetFetchResponse(
        throttle_time_ms=8,
        topics=[
            s_offset_fetch.OffsetFetchResponse.OffsetFetchResponseTopic(
                name="tøpic-中",
                partitions=[
                    s_offset_fetch.OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=0,
                        committed_offset=100,
                        committed_leader_epoch=7,
                        metadata="m-ü",
                        error_code=0,
                    ),
                    s_offset_fetch.OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=1,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata=None,
                        error_code=0,
                    ),
                ],
            ),
            s_offset_fetch.OffsetFetchResponse.OffsetFetchResponseTopic(name="t2", partitions=[]),
        ],
        error_code=14,
        groups=[
            s_offset_fetch.OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=GROUP,
                topics=[
                    s_offset_fetch.OffsetFetchResponse.OffsetFetchResponseTopics(
                        name="tøpic-中",
                        partitions=[
                            GP(
                                partition_index=0,
                                committed_offset=100,
                                committed_leader_epoch=7,
                                metadata="m-ü",
                                error_code=0,
                            ),
                            GP(
                                partition_index=1,
                                committed_offset=-1,
                                committed_leader_epoch=-1,
                                metadata=None,
                                error_code=3,
                            ),
                        ],
                    )
                ],
                error_code=0,
            ),
            s_offset_fetch.OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id="g-2", topics=[], error_code=69
            ),
        ],
    )


def check_offset_fetch_request(body: Any, v: int) -> None:
    if v <= 7:
        assert body.group_id == GROUP
        assert [(t.name, t.partition_indexes) for t in body.topics] == [
            ("tøpic-中", [0, 1, 2**31 - 1]),
            ("t2", []),
        ]
        assert body.groups == []
    else:
        assert body.group_id == ""
        g0, g1 = body.groups
        assert (g0.group_id, g1.group_id, g1.topics) == (GROUP, "g-2", None)
        assert [(t.name, t.partition_indexes) for t in g0.topics] == [("tøpic-中", [0, 1])]
        assert (g0.member_id, g0.member_epoch) == ((MEMBER, 5) if v >= 9 else (None, -1))
    assert body.require_stable is (v >= 7)


def check_offset_fetch_response(got: Any, v: int) -> None:
    if v <= 7:
        p0, p1 = got.topics[0].partitions
        assert (p0.committed_offset, p0.metadata) == (100, "m-ü")
        assert (p1.committed_offset, p1.metadata) == (-1, None)
        assert p0.committed_leader_epoch == (7 if v >= 5 else -1)
        assert got.error_code == (14 if v >= 2 else 0)
    else:
        g0, g1 = got.groups
        assert [p.error_code for p in g0.topics[0].partitions] == [0, 3]
        assert g0.topics[0].partitions[1].metadata is None
        assert (g1.group_id, g1.topics, g1.error_code) == ("g-2", [], 69)
    assert got.throttle_time_ms == (8 if v >= 3 else 0)


OFFSET_FETCH = ApiCase(
    "OffsetFetch",
    OffsetFetchRequest,
    OffsetFetchResponse,
    range(1, 10),
    kp_offset_fetch_request,
    strom_offset_fetch_response,
    check_offset_fetch_request,
    check_offset_fetch_response,
)

CASES = [JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH]
PARAMS = [p for c in CASES for p in c.params()]


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_kafka_python_request_decodes_in_strom(case: ApiCase, version: int) -> None:
    run_request_case(case, version, correlation_id=1_000_000 * version + 1)


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_strom_response_decodes_in_kafka_python(case: ApiCase, version: int) -> None:
    run_response_case(case, version, correlation_id=-1 - version)


@pytest.mark.parametrize("version", range(2, 8), ids=case_id)
def test_offset_fetch_request_null_topics_means_all(version: int) -> None:
    """OffsetFetch v2-7: a null topic list asks for every committed offset."""
    req = OffsetFetchRequest(version=version, group_id=GROUP, topics=None)
    _, data = kp_send([(req, 1)])
    body = strom_body(data, s_offset_fetch.OffsetFetchRequest)
    assert body.group_id == GROUP
    assert body.topics is None
