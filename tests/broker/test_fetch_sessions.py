"""Fetch sessions (KIP-227): full and incremental fetches, errors, the bounded cache."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from strom.broker.data.fetch_sessions import CachedPartition, FetchSessionCache
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from tests.broker.test_produce_helpers import (
    batch,
    create_topic,
    fetch_request,
    produce,
    records_of,
    state_of,
)

pytestmark = pytest.mark.trio


def _request(parts: list[tuple[str, int, int]], session_id: int, epoch: int) -> FetchRequest:
    """A fetch of (topic, partition, offset) triples in one session step."""
    request = FetchRequest(session_id=session_id, session_epoch=epoch)
    for topic, partition, offset in parts:
        request.topics.append(fetch_request(topic, offset, partition).topics[0])
    return request


def _seen(response: FetchResponse) -> dict[tuple[str, int], FetchResponse.PartitionData]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


async def test_full_then_incremental(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t", partitions=2)
    await produce(client, "t", batch([b"a"]), partition=0)
    await produce(client, "t", batch([b"b"]), partition=1)
    full = await client.request(_request([("t", 0, 0), ("t", 1, 0)], 0, 0), 12, FetchResponse)
    assert full.error_code == ErrorCode.NONE
    session = full.session_id
    assert session != 0
    assert set(_seen(full)) == {("t", 0), ("t", 1)}
    # nothing changed: an incremental fetch naming the new positions returns no partitions
    nothing = await client.request(
        _request([("t", 0, 1), ("t", 1, 1)], session, 1), 12, FetchResponse
    )
    assert (nothing.error_code, nothing.session_id) == (ErrorCode.NONE, session)
    assert nothing.responses == []
    # only the partition with news comes back, and unnamed partitions keep their positions
    await produce(client, "t", batch([b"c"]), partition=1)
    inc = await client.request(_request([], session, 2), 12, FetchResponse)
    assert list(_seen(inc)) == [("t", 1)]
    assert records_of(_seen(inc)[("t", 1)].records) == [(1, b"c")]
    assert _seen(inc)[("t", 1)].high_watermark == 2


async def test_forgotten_topics_and_closing(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t", partitions=2)
    full = await client.request(_request([("t", 0, 0), ("t", 1, 0)], 0, 0), 12, FetchResponse)
    session = full.session_id
    request = _request([], session, 1)
    request.forgotten_topics_data = [FetchRequest.ForgottenTopic(topic="t", partitions=[0])]
    await client.request(request, 12, FetchResponse)
    cached = state_of(broker).fetch_sessions.get(session)
    assert cached is not None
    assert list(cached.partitions) == [("t", 1)]
    # forgetting everything closes the session
    request = _request([], session, 2)
    request.forgotten_topics_data = [FetchRequest.ForgottenTopic(topic="t", partitions=[1])]
    closed = await client.request(request, 12, FetchResponse)
    assert closed.session_id == 0
    assert state_of(broker).fetch_sessions.get(session) is None


async def test_session_errors(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    missing = await client.request(_request([], 12345, 1), 12, FetchResponse)
    assert (missing.error_code, missing.session_id, missing.responses) == (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        0,
        [],
    )
    full = await client.request(_request([("t", 0, 0)], 0, 0), 12, FetchResponse)
    wrong = await client.request(_request([], full.session_id, 7), 12, FetchResponse)
    assert wrong.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # a v13 request on a name-based session
    ids = await client.request(_request([], full.session_id, 1), 13, FetchResponse)
    assert ids.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # epoch -1 closes the session and is answered without one
    final = await client.request(_request([("t", 0, 0)], full.session_id, -1), 12, FetchResponse)
    assert (final.error_code, final.session_id) == (ErrorCode.NONE, 0)
    assert state_of(broker).fetch_sessions.get(full.session_id) is None


async def test_sessions_by_topic_id(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    topic_id = state_of(broker).image.topic("t").topic_id  # type: ignore[union-attr]
    request = _request([("", 0, 0)], 0, 0)
    request.topics[0].topic_id = topic_id
    unknown = FetchRequest.FetchTopic(
        topic_id=uuid.uuid4(), partitions=[FetchRequest.FetchPartition()]
    )
    request.topics.append(unknown)
    full = await client.request(request, 13, FetchResponse)
    assert [(t.topic_id, t.partitions[0].error_code) for t in full.responses] == [
        (topic_id, ErrorCode.NONE),
        (unknown.topic_id, ErrorCode.UNKNOWN_TOPIC_ID),
    ]
    await produce(client, "t", batch([b"x"]))
    inc = await client.request(_request([], full.session_id, 1), 13, FetchResponse)
    # the erroring partition is always resent; the other has news
    assert {t.topic_id for t in inc.responses} == {topic_id, unknown.topic_id}


async def test_versions_before_7_are_sessionless(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t")
    response = await client.request(_request([("t", 0, 0)], 0, 0), 6, FetchResponse)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert state_of(broker).fetch_sessions.sessions == {}


async def test_cache_is_bounded(tmp_path: Path) -> None:
    overrides = {"max.incremental.fetch.session.cache.slots": "2"}
    async with open_broker(tmp_path, overrides) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        await create_topic(broker, "t", partitions=3)
        ids = []
        for parts in ([("t", 0, 0), ("t", 1, 0)], [("t", 0, 0), ("t", 1, 0)], [("t", 0, 0)]):
            ids.append((await client.request(_request(parts, 0, 0), 12, FetchResponse)).session_id)
        assert ids[0]
        assert ids[1]
        assert ids[2] == 0  # full, and no session is stale or smaller than this one
        assert len(state_of(broker).fetch_sessions.sessions) == 2
        await client.aclose()


def _parts(n: int) -> dict[tuple[str | uuid.UUID, int], CachedPartition]:
    return {("t", i): CachedPartition("t", uuid.UUID(int=0), i, 0, 100) for i in range(n)}


async def test_eviction_rules() -> None:
    cache = FetchSessionCache(2, eviction_ms=1000)
    small = cache.maybe_create(0, False, False, _parts(1))
    cache.maybe_create(0, False, False, _parts(5))
    # young sessions are not evictable by consumers
    assert cache.maybe_create(10, False, False, _parts(9)) == 0
    # a follower (privileged) may evict the least valuable consumer session at once
    follower = cache.maybe_create(20, True, False, _parts(2))
    assert follower
    assert small not in cache.sessions
    # after the eviction time, an idle session makes room for anyone
    assert cache.maybe_create(5000, False, False, _parts(1))
    assert len(cache.sessions) == 2


async def test_a_tracked_session_notes_the_partitions_added_and_dropped() -> None:
    """A follower's session notes membership changes (the leader's watch follows them without
    walking the session); a consumer's does not track them."""
    cache = FetchSessionCache(2)
    consumer = cache.sessions[cache.maybe_create(0, False, False, _parts(2))]
    consumer.update([CachedPartition("t", uuid.UUID(int=0), 5, 0, 100)], [("t", 0)])
    assert consumer.membership is None
    follower = cache.sessions[cache.maybe_create(0, True, False, _parts(3))]
    follower.membership = {}
    moved = CachedPartition("t", uuid.UUID(int=0), 1, 7, 100)  # already there: not a change
    added = CachedPartition("t", uuid.UUID(int=0), 4, 0, 100)
    follower.update([moved, added], [("t", 0), ("t", 9)])  # ("t", 9) was never there
    assert list(follower.membership) == [("t", 4), ("t", 0)]
    assert follower.partitions[("t", 1)].fetch_offset == 7
    assert set(follower.partitions) == {("t", 1), ("t", 2), ("t", 4)}
