"""Metadata: every version, auto-creation, topic ids, errors."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import cast

import pytest

from strom.broker.admin.partition_leadership import leadership
from strom.broker.handlers import metadata
from strom.broker.handlers.request import RequestContext
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.coordinator.controller.liveness import OfflineReplicas
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.fence_broker_record import FenceBrokerRecord
from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.broker.test_describe_cluster import _registration, _State

pytestmark = pytest.mark.trio

Topic = MetadataRequest.MetadataRequestTopic


@pytest.mark.parametrize("version", range(14))
async def test_every_version_lists_this_broker(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    request = MetadataRequest(topics=[] if version == 0 else None)
    response = await client.request(request, version, MetadataResponse)
    assert [(b.node_id, f"{b.host}:{b.port}") for b in response.brokers] == [(1, broker.bootstrap)]
    if version >= 2:
        assert response.cluster_id
    if version >= 1:
        assert response.controller_id == 1


async def test_auto_creates_a_missing_topic(client: KafkaClient) -> None:
    response = await client.request(
        MetadataRequest(topics=[Topic(name="orders")], allow_auto_topic_creation=True),
        12,
        MetadataResponse,
    )
    [topic] = response.topics
    assert topic.error_code == ErrorCode.NONE
    assert topic.name == "orders"
    assert topic.topic_id != uuid.UUID(int=0)
    assert [p.partition_index for p in topic.partitions] == [0]
    assert topic.partitions[0].leader_id == 1
    # and by id (v10+)
    by_id = await client.request(
        MetadataRequest(topics=[Topic(topic_id=topic.topic_id, name=None)]), 12, MetadataResponse
    )
    assert by_id.topics[0].name == "orders"


async def test_no_auto_creation_when_the_request_says_no(client: KafkaClient) -> None:
    response = await client.request(
        MetadataRequest(topics=[Topic(name="nope")], allow_auto_topic_creation=False),
        12,
        MetadataResponse,
    )
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_no_auto_creation_when_the_broker_says_no(tmp_path: Path) -> None:
    async with open_broker(tmp_path, {"auto.create.topics.enable": "false"}) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        response = await client.request(
            MetadataRequest(topics=[Topic(name="nope")]), 3, MetadataResponse
        )
        assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await client.aclose()


@pytest.mark.parametrize("name", ["bad/name", "a" * 250, ".."])
async def test_invalid_topic_name_without_auto_creation(client: KafkaClient, name: str) -> None:
    """Kafka validates a name it does not create: INVALID_TOPIC_EXCEPTION, not UNKNOWN_TOPIC."""
    response = await client.request(
        MetadataRequest(topics=[Topic(name=name)], allow_auto_topic_creation=False),
        12,
        MetadataResponse,
    )
    assert response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_invalid_topic_name(client: KafkaClient) -> None:
    response = await client.request(
        MetadataRequest(topics=[Topic(name="bad/name")]), 12, MetadataResponse
    )
    assert response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_unknown_topic_id(client: KafkaClient) -> None:
    response = await client.request(
        MetadataRequest(topics=[Topic(topic_id=uuid.uuid4(), name=None)]), 12, MetadataResponse
    )
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_topics_survive_a_restart(tmp_path: Path) -> None:
    async with open_broker(tmp_path) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        await client.request(MetadataRequest(topics=[Topic(name="kept")]), 12, MetadataResponse)
        await client.aclose()
    async with open_broker(tmp_path) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        response = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
        assert [t.name for t in response.topics] == ["kept"]
        await client.aclose()


@pytest.mark.parametrize("version", [10, 11, 12, 13])
async def test_lookup_by_id_ignores_the_empty_name_java_sends(client: KafkaClient, version: int) -> None:
    created = await client.request(MetadataRequest(topics=[Topic(name="by-id")]), 12, MetadataResponse)
    topic_id = created.topics[0].topic_id
    response = await client.request(
        MetadataRequest(topics=[Topic(topic_id=topic_id, name="")]), version, MetadataResponse
    )
    assert [(t.error_code, t.name, t.topic_id) for t in response.topics] == [(0, "by-id", topic_id)]
    unknown = uuid.uuid4()
    response = await client.request(
        MetadataRequest(topics=[Topic(topic_id=unknown, name="" if version < 12 else None)]),
        version,
        MetadataResponse,
    )
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert response.topics[0].topic_id == unknown


@pytest.mark.parametrize("name", ["..", ".", "bad name!", "with/slash", "a" * 250])
async def test_invalid_names_without_auto_creation(client: KafkaClient, name: str) -> None:
    """Kafka validates a missing topic's name even when it will not create it (differential)."""
    response = await client.request(
        MetadataRequest(topics=[Topic(name=name), Topic(name="a" * 249)],
                        allow_auto_topic_creation=False),
        12,
        MetadataResponse,
    )  # fmt: skip
    assert [t.error_code for t in response.topics] == [
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]


async def test_leaders_and_offline_replicas_follow_the_image_and_reports() -> None:
    """The answer for every topic finds the reachable brokers once per request: it must give
    what `leadership` gives partition by partition, and follow fencing, leader changes and
    offline reports from one request to the next."""
    topic_id = uuid.uuid4()
    image = MetadataImage.EMPTY.apply_all(
        [
            _registration(1, fenced=False),  # this broker
            _registration(2, fenced=True),
            _registration(3, fenced=False, listener="OTHER"),
            _registration(4, fenced=False),
            TopicRecord("t", topic_id),
            *(
                PartitionRecord(partition_id=p, topic_id=topic_id, replicas=r, isr=r, leader=leader)
                for p, r, leader in [
                    (2, [3, 4], 4),  # a replica not on this listener
                    (0, [1, 4], 4),  # partitions out of index order in the image
                    (1, [2, 1], 2),  # a fenced leader
                    (3, [1, 4], 9),  # a leader that is no replica and not registered
                    (4, [1], 4),  # a leader that is no replica but reachable
                    (5, [1, 4], -1),
                ]
            ),
        ]
    )
    state = _State(image)

    async def answer(listener: str = "PLAINTEXT") -> list[tuple[int, int, int, list[int]]]:
        context = RequestContext(3, 12, 1, None, "127.0.0.1", 1, listener)
        body = MetadataRequest(topics=None)
        response = await metadata.handle(cast(BrokerState, state), context, body)
        [topic] = response.topics
        expected = [
            leadership(cast(BrokerState, state), state.image, topic_id, p, listener)
            for p in sorted(state.image.topics_by_id[topic_id].partitions.values(),
                            key=lambda p: p.partition_id)
        ]  # fmt: skip
        got = [
            (p.partition_index, p.error_code, p.leader_id, p.offline_replicas)
            for p in topic.partitions
        ]
        assert [(leader, offline) for _, _, leader, offline in got] == expected
        return got

    na = ErrorCode.LEADER_NOT_AVAILABLE
    assert await answer() == [
        (0, 0, 4, []), (1, na, -1, [2]), (2, 0, 4, [3]), (3, na, -1, []), (4, 0, 4, []),
        (5, na, -1, []),
    ]  # fmt: skip
    assert [leader for _, _, leader, _ in await answer("OTHER")] == [-1, -1, -1, -1, -1, -1]
    state.offline_replicas = OfflineReplicas().report(4, [(topic_id, 0)])
    assert (await answer())[0] == (0, na, -1, [4])
    state.offline_replicas = OfflineReplicas()
    state.image = state.image.apply_all(
        [
            PartitionChangeRecord(partition_id=1, topic_id=topic_id, leader=1),
            FenceBrokerRecord(id=4, epoch=4),
        ]
    )
    assert await answer() == [
        (0, na, -1, [4]), (1, 0, 1, [2]), (2, na, -1, [3, 4]), (3, na, -1, [4]),
        (4, na, -1, []), (5, na, -1, [4]),
    ]  # fmt: skip
