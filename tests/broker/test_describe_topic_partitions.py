"""DescribeTopicPartitions: topics, pagination with cursors, errors, offline replicas."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import cast

import pytest

from strom.broker.admin.authz import TOPIC_OPERATIONS
from strom.broker.handlers import describe_topic_partitions
from strom.broker.handlers.request import RequestContext
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import open_broker
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from tests.broker.test_create_topics import create, create_topic, topic
from tests.broker.test_describe_cluster import _registration, _State

pytestmark = pytest.mark.trio

Request = DescribeTopicPartitionsRequest
Response = DescribeTopicPartitionsResponse
ZERO = uuid.UUID(int=0)


async def describe(
    client: KafkaClient,
    *names: str,
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
) -> Response:
    request = Request(
        topics=[Request.TopicRequest(n) for n in names],
        response_partition_limit=limit,
        cursor=Request.Cursor(*cursor) if cursor else None,
    )
    return await client.request(request, 0, Response)


def pages(response: Response) -> list[tuple[str | None, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def cursor_of(response: Response) -> tuple[str, int] | None:
    cursor = response.next_cursor
    return None if cursor is None else (cursor.topic_name, cursor.partition_index)


async def test_named_topics(client: KafkaClient) -> None:
    [created] = await create(client, topic("b", 2))
    await create_topic(client, "__consumer_offsets")
    response = await describe(client, "b", "missing", "bad/name", "__consumer_offsets", "b")
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("__consumer_offsets", 0),
        ("b", 0),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    offsets, b, _, missing = response.topics
    assert offsets.is_internal
    assert not b.is_internal
    assert b.topic_id == created.topic_id
    assert (missing.topic_id, missing.partitions) == (ZERO, [])
    assert all(t.topic_authorized_operations == TOPIC_OPERATIONS for t in response.topics)
    [p0, p1] = b.partitions
    assert (p0.partition_index, p0.error_code, p0.leader_id, p0.leader_epoch) == (0, 0, 1, 0)
    assert (p1.replica_nodes, p1.isr_nodes, p1.offline_replicas) == ([1], [1], [])
    assert (p1.eligible_leader_replicas, p1.last_known_elr) == ([], [])
    assert response.next_cursor is None


async def test_all_topics_when_none_named(client: KafkaClient) -> None:
    assert (await describe(client)).topics == []
    await create_topic(client, "z")
    await create_topic(client, "a", 2)
    assert pages(await describe(client)) == [("a", [0, 1]), ("z", [0])]


async def test_pagination_walks_every_partition(client: KafkaClient) -> None:
    await create_topic(client, "a", 3)
    await create_topic(client, "b", 2)
    await create_topic(client, "c", 1)
    first = await describe(client, limit=2)
    assert (pages(first), cursor_of(first)) == ([("a", [0, 1])], ("a", 2))
    second = await describe(client, limit=2, cursor=cursor_of(first))
    assert (pages(second), cursor_of(second)) == ([("a", [2]), ("b", [0])], ("b", 1))
    third = await describe(client, limit=2, cursor=cursor_of(second))
    assert (pages(third), cursor_of(third)) == ([("b", [1]), ("c", [0])], None)
    # a limit used up exactly points at the next topic's first partition
    exact = await describe(client, limit=3)
    assert (pages(exact), cursor_of(exact)) == ([("a", [0, 1, 2])], ("b", 0))


async def test_cursor_with_named_topics(client: KafkaClient) -> None:
    await create_topic(client, "a", 2)
    await create_topic(client, "b", 2)
    response = await describe(client, "a", "b", cursor=("a", 1))
    assert pages(response) == [("a", [1]), ("b", [0, 1])]
    skipped = await describe(client, "a", "b", cursor=("b", 1))
    assert pages(skipped) == [("b", [1])]
    beyond = await describe(client, "a", cursor=("a", 9))
    assert pages(beyond) == [("a", [])]


async def test_cursor_topic_must_be_named(client: KafkaClient) -> None:
    await create_topic(client, "a")
    response = await describe(client, "a", "zz", cursor=("b", 0))
    assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
        ("a", ErrorCode.INVALID_REQUEST, []),
        ("zz", ErrorCode.INVALID_REQUEST, []),
    ]


async def test_non_positive_limits(client: KafkaClient) -> None:
    await create_topic(client, "a")
    zero = await describe(client, limit=0)
    assert (pages(zero), cursor_of(zero)) == ([], ("a", 0))
    negative = await describe(client, limit=-1)
    assert (pages(negative), cursor_of(negative)) == ([], None)


async def test_broker_partition_size_limit(tmp_path: Path) -> None:
    async with open_broker(tmp_path, {"max.request.partition.size.limit": "2"}) as running:
        client = await KafkaClient.connect(running.bootstrap)
        await create_topic(client, "a", 3)
        response = await describe(client, limit=100)
        assert (pages(response), cursor_of(response)) == ([("a", [0, 1])], ("a", 2))
        await client.aclose()


async def test_offline_replicas_and_leaders() -> None:
    topic_id = uuid.uuid4()
    image = MetadataImage.EMPTY.apply_all(
        [
            _registration(1, fenced=False),
            _registration(2, fenced=True),
            TopicRecord("t", topic_id),
            PartitionRecord(
                partition_id=0,
                topic_id=topic_id,
                replicas=[2, 1, 5],
                isr=[2, 1],
                leader=2,
                leader_epoch=3,
            ),
        ]
    )
    state = cast(BrokerState, _State(image))
    context = RequestContext(75, 0, 1, None, "127.0.0.1", 1, "PLAINTEXT")
    response = await describe_topic_partitions.handle(state, context, Request())
    [partition] = response.topics[0].partitions
    assert (partition.leader_id, partition.leader_epoch) == (-1, 3)
    assert (partition.replica_nodes, partition.isr_nodes) == ([2, 1, 5], [2, 1])
    assert partition.offline_replicas == [2, 5]


async def test_eligible_leader_replicas_and_last_known_elr() -> None:
    topic_id = uuid.uuid4()
    image = MetadataImage.EMPTY.apply_all(
        [
            _registration(1, fenced=True),
            _registration(2, fenced=True),
            _registration(3, fenced=True),
            TopicRecord("t", topic_id),
            PartitionRecord(
                partition_id=0,
                topic_id=topic_id,
                replicas=[1, 2, 3],
                isr=[],
                leader=-1,
                leader_epoch=4,
                eligible_leader_replicas=[2, 3],
                last_known_elr=[1],
            ),
        ]
    )
    state = cast(BrokerState, _State(image))
    context = RequestContext(75, 0, 1, None, "127.0.0.1", 1, "PLAINTEXT")
    response = await describe_topic_partitions.handle(state, context, Request())
    [partition] = response.topics[0].partitions
    assert (partition.isr_nodes, partition.leader_id) == ([], -1)
    assert (partition.eligible_leader_replicas, partition.last_known_elr) == ([2, 3], [1])
