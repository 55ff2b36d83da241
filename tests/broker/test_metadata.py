"""Metadata: every version, auto-creation, topic ids, errors."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

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
