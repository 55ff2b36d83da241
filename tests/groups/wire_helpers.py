"""Build group requests for the handler tests."""

from __future__ import annotations

from strom.broker.testing.client import KafkaClient
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.join_group import JoinGroupRequest, JoinGroupResponse
from strom.wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from strom.wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse


async def create_topic(client: KafkaClient, name: str, partitions: int = 3) -> None:
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1
            )
        ]
    )
    response = await client.request(request, 7, CreateTopicsResponse)
    assert response.topics[0].error_code == 0


def join_request(
    group: str, member_id: str = "", *, instance: str | None = None, protocol_type: str = "consumer"
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"meta")],
    )


async def join(
    client: KafkaClient, group: str, version: int = 9, instance: str | None = None
) -> JoinGroupResponse:
    """Join as a new member, doing the KIP-394 round trip when the version has it."""
    response = await client.request(
        join_request(group, instance=instance), version, JoinGroupResponse
    )
    if response.error_code == 79:  # MEMBER_ID_REQUIRED
        response = await client.request(
            join_request(group, response.member_id, instance=instance), version, JoinGroupResponse
        )
    assert response.error_code == 0, response.error_code
    return response


async def form(client: KafkaClient, group: str, assignment: bytes = b"asg") -> JoinGroupResponse:
    """One member, leader of a Stable generation with `assignment`."""
    joined = await join(client, group)
    sync = SyncGroupRequest(
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=joined.member_id, assignment=assignment
            )
        ],
    )
    synced = await client.request(sync, 5, SyncGroupResponse)
    assert synced.error_code == 0
    return joined


def commit_request(
    group: str,
    topic: str,
    offset: int,
    *,
    generation: int = -1,
    member: str = "",
    metadata: str | None = "md",
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=offset + p, committed_metadata=metadata
                    )
                    for p in range(2)
                ],
            )
        ],
    )


async def commit(
    client: KafkaClient,
    group: str,
    topic: str,
    offset: int,
    version: int = 9,
    *,
    generation: int = -1,
    member: str = "",
) -> list[int]:
    request = commit_request(group, topic, offset, generation=generation, member=member)
    response = await client.request(request, version, OffsetCommitResponse)
    return [p.error_code for t in response.topics for p in t.partitions]
