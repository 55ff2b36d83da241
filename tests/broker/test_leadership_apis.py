"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments over the wire on a
real single node, and forwarded by a node that is not the active controller."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from strom.wire.messages.broker_registration import BrokerRegistrationRequest
from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from strom.wire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from tests.broker.test_create_topics import create_topic
from tests.broker.test_forwarding import (
    WITH_CONTROLLER_LISTENER,
    NotActive,
    _controller,
    _driver,
    follower,
)

pytestmark = pytest.mark.trio
__all__ = ["follower"]  # the fixture, imported for use here

Reassign = AlterPartitionReassignmentsRequest
Listing = ListPartitionReassignmentsRequest


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return dict(WITH_CONTROLLER_LISTENER)


def _elect_request(
    partitions: dict[str, list[int]] | None, election_type: int = 0, timeout_ms: int = 30_000
) -> ElectLeadersRequest:
    return ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [ElectLeadersRequest.TopicPartitions(t, ps) for t, ps in partitions.items()],
        timeout_ms=timeout_ms,
    )


def _results(response: ElectLeadersResponse) -> list[tuple[str, int, int]]:
    return [
        (r.topic, p.partition_id, p.error_code)
        for r in response.replica_election_results
        for p in r.partition_result
    ]


def _reassign_request(
    name: str, replicas: list[int] | None, timeout_ms: int = 30_000
) -> AlterPartitionReassignmentsRequest:
    return Reassign(
        timeout_ms=timeout_ms,
        topics=[Reassign.ReassignableTopic(name, [Reassign.ReassignablePartition(0, replicas)])],
    )


async def _reassign(
    client: KafkaClient, name: str, replicas: list[int] | None, timeout_ms: int = 30_000
) -> tuple[int, int, str | None]:
    response = await client.request(
        _reassign_request(name, replicas, timeout_ms), 0, AlterPartitionReassignmentsResponse
    )
    [topic] = response.responses
    [partition] = topic.partitions
    return response.error_code, partition.error_code, partition.error_message


async def _listed(
    client: KafkaClient, topics: dict[str, list[int]] | None = None
) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    request = Listing(
        topics=None
        if topics is None
        else [Listing.ListPartitionReassignmentsTopics(n, ps) for n, ps in topics.items()]
    )
    response = await client.request(request, 0, ListPartitionReassignmentsResponse)
    assert response.error_code == ErrorCode.NONE
    return [
        (t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    ]


async def _register_broker_2(broker: EmbeddedBroker) -> None:
    """A second broker registers (and stays fenced: it never heartbeats)."""
    driver = _driver(broker)
    request = BrokerRegistrationRequest(
        broker_id=2,
        cluster_id=driver.cluster_id,
        incarnation_id=uuid.UUID(int=2),
        listeners=[BrokerRegistrationRequest.Listener("PLAINTEXT", "127.0.0.1", 19092, 0)],
        features=[BrokerRegistrationRequest.Feature("metadata.version", 7, 25)],
    )
    response = await driver.broker_registration(request)
    assert response.error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", range(3))
async def test_elect_leaders_at_every_version(client: KafkaClient, version: int) -> None:
    await create_topic(client, "e")
    response = await client.request(
        _elect_request({"e": [0], "nope": [0]}), version, ElectLeadersResponse
    )
    assert _results(response) == [
        ("e", 0, ErrorCode.ELECTION_NOT_NEEDED),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    if version >= 1:  # v0 has no election type: always preferred
        unclean = await client.request(_elect_request({"e": [0]}, 1), version, ElectLeadersResponse)
        assert _results(unclean) == [("e", 0, ErrorCode.ELECTION_NOT_NEEDED)]


async def test_elect_leaders_for_every_partition_lists_only_elections_made(
    client: KafkaClient,
) -> None:
    await create_topic(client, "all")
    response = await client.request(_elect_request(None), 2, ElectLeadersResponse)
    assert response.error_code == ErrorCode.NONE
    assert [(r.topic, r.partition_result) for r in response.replica_election_results] == [
        ("all", [])
    ]


async def test_elect_leaders_past_its_deadline_times_out(client: KafkaClient) -> None:
    await create_topic(client, "late")
    response = await client.request(
        _elect_request({"late": [0]}, timeout_ms=0), 2, ElectLeadersResponse
    )
    assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert _results(response) == [("late", 0, ErrorCode.REQUEST_TIMED_OUT)]


async def test_a_reassignment_is_listed_until_cancelled(
    broker: EmbeddedBroker, client: KafkaClient, tmp_path: Path
) -> None:
    await create_topic(client, "r")
    await _register_broker_2(broker)
    assert await _listed(client) == []
    assert await _reassign(client, "r", [1, 2]) == (ErrorCode.NONE, ErrorCode.NONE, None)
    assert await _listed(client) == [("r", 0, [1, 2], [2], [])]
    assert await _listed(client, {"r": [0, 5], "nope": [0]}) == [("r", 0, [1, 2], [2], [])]
    partition = _driver(broker).image.partition("r", 0)
    assert partition is not None
    assert (partition.replicas, partition.isr, partition.leader) == ((1, 2), (1,), 1)

    assert await _reassign(client, "r", None) == (ErrorCode.NONE, ErrorCode.NONE, None)
    assert await _listed(client) == []
    again = await _reassign(client, "r", None)
    assert again[1] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


async def test_reassignment_errors(client: KafkaClient) -> None:
    await create_topic(client, "bad")
    assert await _reassign(client, "bad", [1, 7]) == (
        ErrorCode.NONE,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 7, but no such broker is registered.",
    )
    assert await _reassign(client, "gone", [1]) == (
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "Unable to find a topic named gone.",
    )
    timed_out = await _reassign(client, "bad", [1], timeout_ms=0)
    assert timed_out == (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT, None)


async def test_the_apis_are_forwarded_to_the_active_controller(
    broker: EmbeddedBroker, follower: tuple[EmbeddedBroker, NotActive]
) -> None:
    a, driver = follower
    driver.target = _controller(broker)
    client_b = await KafkaClient.connect(broker.bootstrap)
    client_a = await KafkaClient.connect(a.bootstrap)
    try:
        await create_topic(client_b, "fw")  # on the active controller only
        await _register_broker_2(broker)
        elected = await client_a.request(_elect_request({"fw": [0]}), 2, ElectLeadersResponse)
        assert _results(elected) == [("fw", 0, ErrorCode.ELECTION_NOT_NEEDED)]
        assert await _reassign(client_a, "fw", [1, 2]) == (ErrorCode.NONE, ErrorCode.NONE, None)
        assert await _listed(client_a) == [("fw", 0, [1, 2], [2], [])]
        assert driver.image.topic("fw") is None  # A's own controller never saw any of it
    finally:
        await client_a.aclose()
        await client_b.aclose()
