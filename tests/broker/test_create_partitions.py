"""CreatePartitions over the wire: every version, errors, validate_only, timeouts, restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from tests.broker.test_create_topics import create_topic, metadata

pytestmark = pytest.mark.trio

Topic = CreatePartitionsRequest.CreatePartitionsTopic
Assignment = CreatePartitionsRequest.CreatePartitionsAssignment


async def grow(
    client: KafkaClient,
    *topics: Topic,
    version: int = 3,
    timeout_ms: int = 30_000,
    validate_only: bool = False,
) -> list[tuple[str, int, str | None]]:
    request = CreatePartitionsRequest(
        topics=list(topics), timeout_ms=timeout_ms, validate_only=validate_only
    )
    response = await client.request(request, version, CreatePartitionsResponse)
    return [(r.name, r.error_code, r.error_message) for r in response.results]


async def partition_count(client: KafkaClient, name: str) -> int:
    [shown] = (await metadata(client, name)).topics
    return len(shown.partitions)


@pytest.mark.parametrize("version", range(4))
async def test_every_version_grows(
    broker: EmbeddedBroker, client: KafkaClient, version: int, tmp_path: Path
) -> None:
    await create_topic(client, "g")
    assert await grow(client, Topic("g", 3, None), version=version) == [("g", 0, None)]
    assert await partition_count(client, "g") == 3
    assert all((tmp_path / "data" / f"g-{p}").is_dir() for p in range(3))


async def test_manual_assignment(client: KafkaClient) -> None:
    await create_topic(client, "m")
    assert await grow(client, Topic("m", 2, [Assignment([1])])) == [("m", 0, None)]
    [shown] = (await metadata(client, "m")).topics
    assert shown.partitions[1].replica_nodes == [1]
    wrong = await grow(client, Topic("m", 4, [Assignment([1])]))
    assert wrong == [
        (
            "m",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        )
    ]
    [(_, code, _)] = await grow(client, Topic("m", 3, [Assignment([9])]))
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


async def test_not_an_increase(client: KafkaClient) -> None:
    await create_topic(client, "s", 3)
    assert await grow(client, Topic("s", 2, None), Topic("s2", 2, None)) == [
        (
            "s",
            ErrorCode.INVALID_PARTITIONS,
            "The topic s currently has 3 partition(s); 2 would not be an increase.",
        ),
        ("s2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
    ]
    assert await grow(client, Topic("s", 3, None)) == [
        ("s", ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    ]
    assert await partition_count(client, "s") == 3


async def test_duplicates_first(client: KafkaClient) -> None:
    await create_topic(client, "a")
    await create_topic(client, "b")
    results = await grow(client, Topic("a", 2, None), Topic("b", 2, None), Topic("a", 3, None))
    assert results == [
        ("a", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("b", ErrorCode.NONE, None),
    ]
    assert await partition_count(client, "a") == 1


async def test_validate_only_leaves_nothing_behind(client: KafkaClient, tmp_path: Path) -> None:
    await create_topic(client, "v")
    assert await grow(client, Topic("v", 4, None), validate_only=True) == [("v", 0, None)]
    assert await partition_count(client, "v") == 1
    assert not (tmp_path / "data" / "v-1").exists()
    [(_, code, _)] = await grow(client, Topic("v", 1, None), validate_only=True)
    assert code == ErrorCode.INVALID_PARTITIONS


@pytest.mark.parametrize("timeout_ms", [0, -1])
async def test_expired_timeout_changes_nothing(client: KafkaClient, timeout_ms: int) -> None:
    await create_topic(client, "t")
    results = await grow(client, Topic("t", 2, None), Topic("nope", 2, None), timeout_ms=timeout_ms)
    assert results == [
        ("t", ErrorCode.REQUEST_TIMED_OUT, None),
        ("nope", ErrorCode.REQUEST_TIMED_OUT, None),
    ]
    assert await partition_count(client, "t") == 1
    duplicates = await grow(client, Topic("t", 2, None), Topic("t", 2, None), timeout_ms=0)
    assert duplicates == [("t", ErrorCode.INVALID_REQUEST, "Duplicate topic name.")]


async def test_internal_topics_may_grow(client: KafkaClient) -> None:
    await create_topic(client, "__transaction_state")
    assert await grow(client, Topic("__transaction_state", 2, None)) == [
        ("__transaction_state", 0, None)
    ]


async def test_growth_survives_a_restart(tmp_path: Path) -> None:
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        await create_topic(client, "r")
        assert await grow(client, Topic("r", 5, None)) == [("r", 0, None)]
        await client.aclose()
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        assert await partition_count(client, "r") == 5
        assert (tmp_path / "r-4").is_dir()
        await client.aclose()
