"""Malformed input raises ProtocolError, carrying a Kafka error, and nothing else."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.wire.connection import decode_request
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.fetch import FetchResponse
from strom.wire.messages.metadata import MetadataRequest
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from tests.wire.schema_strategies import all_messages, struct_strategy

MESSAGES = all_messages()


def _frame(topics: list[str] | None, version: int = 12) -> bytes:
    return MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    ).encode(version)


def test_truncated_body_raises_protocol_error() -> None:
    data = _frame(["alpha", "beta"])
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            MetadataRequest.decode(data[:cut], 12)


def test_negative_string_length_in_non_nullable_field() -> None:
    # v3 non-flexible: topics array of 1, then name length -1
    data = b"\x00\x00\x00\x01\xff\xff"
    with pytest.raises(ProtocolError) as info:
        MetadataRequest.decode(data, 3)
    assert info.value.error in (ErrorCode.INVALID_REQUEST, ErrorCode.CORRUPT_MESSAGE)


def test_array_count_past_end() -> None:
    data = b"\x7f\xff\xff\xff"  # 2^31-1 topics, no bytes behind them
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(data, 3)


def test_string_length_past_end() -> None:
    data = b"\x00\x00\x00\x01\x00\x10ab"
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(data, 3)


def test_bad_varint() -> None:
    data = b"\xff\xff\xff\xff\xff\xff"  # compact array length that never ends
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(data, 12)


def test_invalid_utf8() -> None:
    data = b"\x00\x00\x00\x01\x00\x02\xff\xfe"
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(data, 3)


def test_tagged_field_size_past_end() -> None:
    good = ProduceResponse().encode(9)
    # last byte is the top-level tag count 0: claim one tag of 100 bytes instead
    with pytest.raises(ProtocolError):
        ProduceResponse.decode(good[:-1] + b"\x01\x05\x64", 9)


def test_unknown_version_is_unsupported_version() -> None:
    with pytest.raises(ProtocolError) as info:
        ProduceRequest.decode(b"", 99)
    assert info.value.error == ErrorCode.UNSUPPORTED_VERSION


def test_unknown_api_key_is_reported_as_unsupported() -> None:
    header = b"\x7f\x00\x00\x01\x00\x00\x00\x09\xff\xff"  # key 32512, v1, corr 9, null client
    event = decode_request(header)
    assert event.header.correlation_id == 9
    assert type(event).__name__ == "UnsupportedRequest"


def test_non_ignorable_field_in_old_version_refuses_to_encode() -> None:
    # CurrentLeader exists from v10 on and is not ignorable.
    resp = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="t",
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(
                        current_leader=ProduceResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=1)
                    )
                ],
            )
        ]
    )
    resp.encode(10)
    with pytest.raises(ProtocolError) as info:
        resp.encode(9)
    assert info.value.error == ErrorCode.UNSUPPORTED_VERSION


def test_null_in_non_nullable_field_refuses_to_encode() -> None:
    req = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name=None)])  # type: ignore[arg-type]
    with pytest.raises(ProtocolError):
        req.encode(9)


def test_records_are_zero_copy_views() -> None:
    resp = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t", partitions=[FetchResponse.PartitionData(records=b"batchbytes")]
            )
        ]
    )
    data = resp.encode(11)
    records = FetchResponse.decode(data, 11).responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert bytes(records) == b"batchbytes"


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_fuzz_random_bytes(index: int, data: Any) -> None:
    schema, cls = MESSAGES[index]
    version = data.draw(st.sampled_from(list(schema.versions())))
    raw = data.draw(st.binary(max_size=64))
    with contextlib.suppress(ProtocolError):
        cls.decode(raw, version)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_fuzz_mutated_valid_messages(index: int, data: Any) -> None:
    schema, cls = MESSAGES[index]
    version = data.draw(st.sampled_from(list(schema.versions())))
    value = data.draw(struct_strategy(schema, cls, schema.fields, version))
    raw = bytearray(value.encode(version))
    if raw:
        for _ in range(data.draw(st.integers(1, 4))):
            pos = data.draw(st.integers(0, len(raw) - 1))
            raw[pos] = data.draw(st.integers(0, 255))
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    with contextlib.suppress(ProtocolError):
        cls.decode(bytes(raw), version)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=80))
def test_fuzz_request_frames(raw: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request(raw)
