"""kafka-python <-> Strom: request and response headers, framing, and KIP-511.

Request header v1 (non-flexible APIs) and v2 (flexible): the client id is a
nullable *non-compact* string in both, tagged fields follow it only in v2.
Response header v0 / v1 likewise, except that ApiVersions responses always use
header v0, even at flexible versions, so a client that does not yet know the
broker's versions can read them (KIP-511).
"""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest

from strom.wire.apis import request_header_version, response_header_version
from strom.wire.connection import (
    Connection,
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response,
)
from strom.wire.formats.protocol.request_header import RequestHeader
from strom.wire.formats.protocol.response_header import ResponseHeader
from strom.wire.messages import api_versions as s_api_versions
from strom.wire.messages import heartbeat as s_heartbeat
from strom.wire.messages import init_producer_id as s_init_producer_id
from tests.wire.kp_helpers import (
    CLIENT_ID,
    case_id,
    kp_api_header,
    kp_consumer,
    kp_metadata,
    kp_producer,
    kp_receive,
    kp_send,
    strom_receive,
    strom_response_bytes,
)

ApiVersionsRequest = kp_metadata.ApiVersionsRequest
ApiVersionsResponse = kp_metadata.ApiVersionsResponse
HeartbeatRequest = kp_consumer.HeartbeatRequest
InitProducerIdRequest = kp_producer.InitProducerIdRequest
KpRequestHeader = kp_api_header.RequestHeader
KpResponseHeader = kp_api_header.ResponseHeader

CLIENT_IDS = [
    pytest.param(CLIENT_ID, id="unicode"),
    pytest.param("", id="empty"),
    pytest.param(None, id="null"),
    # 300 UTF-8 bytes: a compact (uvarint) length would take 2 bytes, not int16.
    pytest.param("ü" * 150, id="long"),
]
CORRELATION_IDS = [0, 1, 2**31 - 1, -1, -(2**31)]
UNSUPPORTED_VERSION = 35


# Heartbeat v3 is the last non-flexible version (header v1), v4 the first
# flexible one (header v2); InitProducerId turns flexible at v2.
@pytest.mark.parametrize(
    ("kp_request", "header_version"),
    [
        pytest.param(
            lambda: HeartbeatRequest(version=3, group_id="g", member_id="m"), 1, id="Heartbeat-v3"
        ),
        pytest.param(
            lambda: HeartbeatRequest(version=4, group_id="g", member_id="m"), 2, id="Heartbeat-v4"
        ),
        pytest.param(
            lambda: InitProducerIdRequest(version=1, transactional_id=None),
            1,
            id="InitProducerId-v1",
        ),
        pytest.param(
            lambda: InitProducerIdRequest(version=2, transactional_id=None),
            2,
            id="InitProducerId-v2",
        ),
        pytest.param(lambda: ApiVersionsRequest(version=2), 1, id="ApiVersions-v2"),
        pytest.param(lambda: ApiVersionsRequest(version=3), 2, id="ApiVersions-v3"),
    ],
)
@pytest.mark.parametrize("client_id", CLIENT_IDS)
def test_request_header_from_kafka_python(
    kp_request: Any, header_version: int, client_id: str | None
) -> None:
    for correlation_id in CORRELATION_IDS:
        req = kp_request()
        _, data = kp_send([(req, correlation_id)], client_id=client_id)
        key, version = req.API_KEY, req.API_VERSION
        assert request_header_version(key, version) == header_version

        # The layout kafka-python put on the wire: int16 (never compact) client id length.
        raw_id = None if client_id is None else client_id.encode()
        assert struct.unpack_from(">hhih", data, 4) == (
            key,
            version,
            correlation_id,
            -1 if raw_id is None else len(raw_id),
        )
        body_at = 14 + (0 if raw_id is None else len(raw_id))
        if header_version == 2:
            assert data[body_at] == 0  # empty header tagged fields
            body_at += 1

        (request,) = strom_receive(data)
        header = request.header
        assert (header.request_api_key, header.request_api_version) == (key, version)
        assert header.correlation_id == correlation_id
        assert header.client_id == client_id
        assert header.unknown_tagged_fields == ()
        assert request.body == type(request.body).decode(data[body_at:], version)


@pytest.mark.parametrize("client_id", CLIENT_IDS)
@pytest.mark.parametrize("version", [1, 2], ids=case_id)
def test_strom_request_header_decodes_in_kafka_python(client_id: str | None, version: int) -> None:
    header = RequestHeader(
        request_api_key=12, request_api_version=4, correlation_id=-99, client_id=client_id
    )
    got = KpRequestHeader.decode(io.BytesIO(header.encode(version)), flexible=version == 2)
    assert (got.request_api_key, got.request_api_version) == (12, 4)
    assert got.correlation_id == -99
    assert got.client_id == client_id


@pytest.mark.parametrize("version", [0, 1], ids=case_id)
@pytest.mark.parametrize("correlation_id", CORRELATION_IDS)
def test_strom_response_header_decodes_in_kafka_python(version: int, correlation_id: int) -> None:
    data = ResponseHeader(correlation_id).encode(version)
    assert len(data) == 4 + version
    got = KpResponseHeader.decode(io.BytesIO(data), flexible=version == 1)
    assert got.correlation_id == correlation_id


def test_response_header_unknown_tagged_fields_reach_kafka_python() -> None:
    """Tags kafka-python does not know are skipped by their size, kept raw."""
    header = ResponseHeader(7, unknown_tagged_fields=((3, b"\x01\x02"), (200, b"\xff" * 130)))
    buf = io.BytesIO(header.encode(1) + b"\xaa")
    got = KpResponseHeader.decode(buf, flexible=True)
    assert got.correlation_id == 7
    assert got.unknown_tags == {"_3": b"\x01\x02", "_200": b"\xff" * 130}
    assert buf.read() == b"\xaa"  # exactly the header was consumed


@pytest.mark.parametrize("version", range(5), ids=case_id)
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    """KIP-511: no tagged-field byte after the correlation id, even at v3/v4."""
    assert response_header_version(18, version) == 0
    proto, data = kp_send([(ApiVersionsRequest(version=version), 4242)])
    (request,) = strom_receive(data)
    body = s_api_versions.ApiVersionsResponse(
        error_code=0, api_keys=[s_api_versions.ApiVersionsResponse.ApiVersion(18, 0, 4)]
    )
    raw = strom_response_bytes(request, body)
    assert struct.unpack_from(">iih", raw) == (len(raw) - 4, 4242, 0)
    assert raw[8:] == body.encode(version)
    ((_, got),) = kp_receive(proto, raw)
    assert got.version == version
    assert [(k.api_key, k.min_version, k.max_version) for k in got.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize("version", [4, 5], ids=case_id)
def test_flexible_response_header_is_v1(version: int) -> None:
    """Other APIs use response header v1 at flexible versions: one empty tag byte."""
    proto, data = kp_send([(InitProducerIdRequest(version=version, transactional_id="t"), 11)])
    (request,) = strom_receive(data)
    body = s_init_producer_id.InitProducerIdResponse(
        throttle_time_ms=1, error_code=0, producer_id=2, producer_epoch=3
    )
    raw = strom_response_bytes(request, body)
    assert struct.unpack_from(">iib", raw) == (len(raw) - 4, 11, 0)
    assert raw[9:] == body.encode(version)
    ((_, got),) = kp_receive(proto, raw)
    assert (got.producer_id, got.producer_epoch) == (2, 3)


@pytest.mark.parametrize("request_version", [3, 4], ids=case_id)
def test_api_versions_error_answer_is_v0_body(request_version: int) -> None:
    """An ApiVersions error answer has a v0 body, which kafka-python expects."""
    proto, data = kp_send([(ApiVersionsRequest(version=request_version), 3)])
    (request,) = strom_receive(data)
    body = s_api_versions.ApiVersionsResponse(
        error_code=UNSUPPORTED_VERSION,
        api_keys=[s_api_versions.ApiVersionsResponse.ApiVersion(18, 0, 2)],
    )
    ((_, got),) = kp_receive(proto, strom_response_bytes(request, body, body_version=0))
    assert got.error_code == UNSUPPORTED_VERSION
    assert got.version == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in got.api_keys] == [(18, 0, 2)]


@pytest.mark.parametrize("too_new", [5, 127, 32767], ids=case_id)
def test_api_versions_request_too_new_for_strom(too_new: int) -> None:
    """KIP-511: a too-new ApiVersions request still has a readable v2 header.

    The frame is what a newer client would send: kafka-python's header class
    (flexible, so v2) followed by a flexible ApiVersions body.
    """
    header = KpRequestHeader(
        request_api_key=18, request_api_version=too_new, correlation_id=-31, client_id=CLIENT_ID
    )
    body = ApiVersionsRequest(
        version=4, client_software_name="future-client", client_software_version="9.9"
    )
    frame = bytes(header.encode(flexible=True)) + bytes(body.encode())
    event = decode_request(frame)
    assert isinstance(event, UnsupportedRequest)
    assert event.header.request_api_key == 18
    assert event.header.request_api_version == too_new
    assert event.header.correlation_id == -31
    assert event.header.client_id == CLIENT_ID

    answer = s_api_versions.ApiVersionsResponse(
        error_code=UNSUPPORTED_VERSION,
        api_keys=[s_api_versions.ApiVersionsResponse.ApiVersion(18, 0, 4)],
    )
    raw = b"".join(bytes(c) for c in encode_response(18, too_new, -31, answer, body_version=0))
    # The client decodes at the version it sent (4 is kafka-python's newest)
    # and falls back to a v0 body on error.
    got = ApiVersionsResponse.decode(raw, version=4, header=True, framed=True)
    assert got.header.correlation_id == -31
    assert got.error_code == UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in got.api_keys] == [(18, 0, 4)]


def test_pipelined_requests_and_responses() -> None:
    """Several kafka-python requests in one buffer, fed to Strom a byte at a time."""
    requests = [
        (ApiVersionsRequest(version=3, client_software_name="a", client_software_version="1"), 1),
        (HeartbeatRequest(version=0, group_id="g-ü", generation_id=5, member_id="m"), 2),
        (HeartbeatRequest(version=4, group_id="g-ü", generation_id=6, member_id="m"), 3),
        (InitProducerIdRequest(version=1, transactional_id=None, transaction_timeout_ms=9), 4),
    ]
    proto, data = kp_send(requests)
    conn = Connection()
    events: list[Request] = []
    for i in range(len(data)):
        conn.receive_data(data[i : i + 1])
        while True:
            event = conn.next_event()
            if not isinstance(event, Request):
                break
            events.append(event)
    assert [(e.header.request_api_key, e.header.correlation_id) for e in events] == [
        (18, 1),
        (12, 2),
        (12, 3),
        (22, 4),
    ]
    bodies = [
        s_api_versions.ApiVersionsResponse(
            error_code=0,
            api_keys=[s_api_versions.ApiVersionsResponse.ApiVersion(12, 0, 4)],
            throttle_time_ms=1,
        ),
        s_heartbeat.HeartbeatResponse(error_code=27),
        s_heartbeat.HeartbeatResponse(throttle_time_ms=8, error_code=0),
        s_init_producer_id.InitProducerIdResponse(producer_id=77, producer_epoch=1),
    ]
    raw = b"".join(conn.send_response(e, b) for e, b in zip(events, bodies, strict=True))
    got = kp_receive(proto, raw)
    assert [cid for cid, _ in got] == [1, 2, 3, 4]
    assert got[0][1].api_keys[0].max_version == 4
    assert got[1][1].error_code == 27
    assert got[2][1].throttle_time_ms == 8
    assert got[3][1].producer_id == 77


# Versions kafka-python can encode but Strom does not implement: removed old
# ones (Kafka 4 dropped them; kafka-python ignores the JSON minimum) and newer
# ones from kafka-python's newer definitions.
OUT_OF_RANGE = [
    (kp_producer.ProduceRequest, 0),
    (kp_producer.ProduceRequest, 2),
    (kp_producer.ProduceRequest, 13),
    (kp_consumer.FetchRequest, 3),
    (kp_consumer.FetchRequest, 18),
    (kp_consumer.ListOffsetsRequest, 0),
    (kp_consumer.ListOffsetsRequest, 11),
    (kp_consumer.JoinGroupRequest, 1),
    (kp_consumer.OffsetCommitRequest, 1),
    (kp_consumer.OffsetCommitRequest, 10),
    (kp_consumer.OffsetFetchRequest, 0),
    (kp_consumer.OffsetFetchRequest, 10),
    (kp_producer.InitProducerIdRequest, 6),
]


@pytest.mark.parametrize(
    ("kp_cls", "version"), OUT_OF_RANGE, ids=[f"{c.__name__}-v{v}" for c, v in OUT_OF_RANGE]
)
def test_unsupported_versions_keep_a_readable_header(kp_cls: Any, version: int) -> None:
    """Strom cannot decode the body, but reads the header so it can answer."""
    _, data = kp_send([(kp_cls(version=version), 424242)])
    event = decode_request(data[4:])
    assert isinstance(event, UnsupportedRequest)
    assert event.header.request_api_key == kp_cls.API_KEY
    assert event.header.request_api_version == version
    assert event.header.correlation_id == 424242
    assert event.header.client_id == CLIENT_ID
    assert event.size == len(data) - 4
