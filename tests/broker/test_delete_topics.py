"""DeleteTopics over the wire: every version, by name and by id, errors, timeouts, restart."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.broker.test_create_topics import create, create_topic, metadata, topic

pytestmark = pytest.mark.trio

State = DeleteTopicsRequest.DeleteTopicState
ZERO = uuid.UUID(int=0)
UNKNOWN_MESSAGE = "This server does not host this topic-partition."


async def delete(
    client: KafkaClient, *names: str, version: int = 6, timeout_ms: int = 30_000
) -> list[DeleteTopicsResponse.DeletableTopicResult]:
    if version >= 6:
        request = DeleteTopicsRequest(topics=[State(name=n) for n in names], timeout_ms=timeout_ms)
    else:
        request = DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)
    return (await client.request(request, version, DeleteTopicsResponse)).responses


async def delete_states(
    client: KafkaClient, *states: State
) -> list[DeleteTopicsResponse.DeletableTopicResult]:
    request = DeleteTopicsRequest(topics=list(states), timeout_ms=30_000)
    return (await client.request(request, 6, DeleteTopicsResponse)).responses


@pytest.mark.parametrize("version", range(1, 7))
async def test_every_version_deletes(
    broker: EmbeddedBroker, client: KafkaClient, version: int, tmp_path: Path
) -> None:
    await create_topic(client, "gone", 2)
    assert (tmp_path / "data" / "gone-1").is_dir()
    [result] = await delete(client, "gone", version=version)
    assert (result.name, result.error_code) == ("gone", ErrorCode.NONE)
    assert result.error_message is None
    [shown] = (await metadata(client, "gone")).topics
    assert shown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not (tmp_path / "data" / "gone-0").exists()
    assert not (tmp_path / "data" / "gone-1").exists()


@pytest.mark.parametrize("version", range(1, 7))
async def test_unknown_topic(client: KafkaClient, version: int) -> None:
    [result] = await delete(client, "never", version=version)
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if version >= 5:
        assert result.error_message == UNKNOWN_MESSAGE


async def test_by_id(client: KafkaClient) -> None:
    [created] = await create(client, topic("byid"))
    [result] = await delete_states(client, State(name=None, topic_id=created.topic_id))
    assert (result.name, result.topic_id, result.error_code) == ("byid", created.topic_id, 0)
    unknown = uuid.uuid4()
    [missing] = await delete_states(client, State(name=None, topic_id=unknown))
    assert (missing.name, missing.topic_id) == (None, unknown)
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert missing.error_message == "This server does not host this topic ID."


async def test_malformed_entries_fail_alone(client: KafkaClient) -> None:
    [created] = await create(client, topic("keep"))
    await create_topic(client, "drop")
    results = await delete_states(
        client,
        State(name=None, topic_id=ZERO),
        State(name="keep", topic_id=created.topic_id),
        State(name="q"),
        State(name="q"),
        State(name="drop"),
    )
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        (None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("keep", ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        ("q", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("drop", ErrorCode.NONE, None),
    ]
    assert (await metadata(client, "keep")).topics[0].error_code == ErrorCode.NONE


async def test_name_and_id_of_the_same_topic(client: KafkaClient) -> None:
    [created] = await create(client, topic("twice"))
    results = await delete_states(
        client, State(name=None, topic_id=created.topic_id), State(name="twice")
    )
    assert [(r.name, r.error_code) for r in results] == [("twice", ErrorCode.INVALID_REQUEST)]
    assert results[0].error_message == (
        "The provided topic name maps to an ID that was already supplied."
    )
    assert (await metadata(client, "twice")).topics[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("version", "code"),
    [(1, ErrorCode.INVALID_REQUEST), (2, ErrorCode.INVALID_REQUEST)]
    + [(v, ErrorCode.TOPIC_DELETION_DISABLED) for v in range(3, 7)],
)
async def test_deletion_disabled(tmp_path: Path, version: int, code: ErrorCode) -> None:
    async with open_broker(tmp_path, {"delete.topic.enable": "false"}) as running:
        client = await KafkaClient.connect(running.bootstrap)
        await create_topic(client, "stays")
        results = await delete(client, "stays", "never", version=version, timeout_ms=0)
        assert [(r.name, r.error_code) for r in results] == [("stays", code), ("never", code)]
        assert all(r.error_message is None for r in results)
        assert (await metadata(client, "stays")).topics[0].error_code == ErrorCode.NONE
        await client.aclose()


@pytest.mark.parametrize("timeout_ms", [0, -5])
async def test_expired_timeout_deletes_nothing(client: KafkaClient, timeout_ms: int) -> None:
    await create_topic(client, "slow")
    results = await delete(client, "slow", "unknown", timeout_ms=timeout_ms)
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("slow", ErrorCode.REQUEST_TIMED_OUT, None),
        ("unknown", ErrorCode.REQUEST_TIMED_OUT, None),
    ]
    assert (await metadata(client, "slow")).topics[0].error_code == ErrorCode.NONE


async def test_expired_timeout_with_nothing_to_look_up(client: KafkaClient) -> None:
    assert await delete(client, timeout_ms=0) == []
    results = await delete(client, "dup", "dup", timeout_ms=0)
    assert [(r.name, r.error_code) for r in results] == [("dup", ErrorCode.INVALID_REQUEST)]


async def test_internal_topics_are_not_protected(client: KafkaClient) -> None:
    await create_topic(client, "__consumer_offsets")
    [result] = await delete(client, "__consumer_offsets")
    assert result.error_code == ErrorCode.NONE
    [metadata_log] = await delete(client, "__cluster_metadata")
    assert metadata_log.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_deletion_survives_a_restart(tmp_path: Path) -> None:
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        await create_topic(client, "old")
        await create_topic(client, "kept")
        [result] = await delete(client, "old")
        assert result.error_code == ErrorCode.NONE
        await client.aclose()
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        listed = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
        assert [t.name for t in listed.topics] == ["kept"]
        assert not (tmp_path / "old-0").exists()
        await client.aclose()


async def test_logs_unknown_to_a_wiped_metadata_log_are_set_aside_not_deleted(
    tmp_path: Path,
) -> None:
    """An operator who wipes the metadata log (or points a node at another cluster's) gets an
    image without the topics on disk: their logs are kept aside as `-stray`, as Kafka keeps
    its stray logs, never deleted, and stay aside (unserved) at the next starts."""
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        await create_topic(client, "precious", 2)
        await client.aclose()
    segments = sorted(os.listdir(tmp_path / "precious-0"))
    shutil.rmtree(tmp_path / "__cluster_metadata-0")
    for start in range(2):
        async with open_broker(tmp_path) as running:
            client = await KafkaClient.connect(running.bootstrap)
            listed = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
            assert [t.name for t in listed.topics] == []
            await client.aclose()
        assert not (tmp_path / "precious-0").exists()
        kept = sorted(name for name in os.listdir(tmp_path) if name.endswith("-stray"))
        assert [name.split(".")[0] for name in kept] == ["precious-0", "precious-1"], start
        assert sorted(os.listdir(tmp_path / kept[0])) == segments
