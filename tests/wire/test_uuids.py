"""UUIDs from the wire: decoded once per distinct value (`wire.message.uuid_of`), equal to and
hashing as `uuid.UUID`, the cache bounded."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.wire import message
from strom.wire.messages.fetch import FetchRequest


@given(st.binary(min_size=16, max_size=16))
def test_a_wire_uuid_is_the_uuid_of_its_bytes(raw: bytes) -> None:
    decoded = message.uuid_of(raw)
    assert decoded == uuid.UUID(bytes=raw)
    assert hash(decoded) == hash(uuid.UUID(bytes=raw))
    assert decoded.bytes == raw


def test_the_same_topic_id_decodes_to_one_object() -> None:
    topic_id = uuid.uuid4()
    request = FetchRequest(topics=[FetchRequest.FetchTopic(topic_id=topic_id)])
    first = FetchRequest.decode(request.encode(17), 17).topics[0].topic_id
    second = FetchRequest.decode(request.encode(17), 17).topics[0].topic_id
    assert first == topic_id
    assert first is second


def test_the_cache_stays_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(message, "_UUIDS", {})
    monkeypatch.setattr(message, "_UUIDS_MAX", 10)
    values = [uuid.uuid4().bytes for _ in range(50)]
    decoded = [message.uuid_of(raw) for raw in values]
    assert 1 <= len(message._UUIDS) <= 10
    assert [u.bytes for u in decoded] == values


def test_an_id_first_seen_after_the_cache_filled_is_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random ids (a bad client) fill the cache; a topic created afterwards still decodes to
    one object per id, as Fetch and Produce on its partitions rely on."""
    monkeypatch.setattr(message, "_UUIDS", {})
    monkeypatch.setattr(message, "_UUIDS_MAX", 10)
    for _ in range(25):
        message.uuid_of(uuid.uuid4().bytes)
    raw = uuid.uuid4().bytes
    assert message.uuid_of(raw) is message.uuid_of(raw)
