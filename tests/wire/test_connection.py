"""The sans-IO connection: framing, size limits, headers and their quirks."""

from __future__ import annotations

import struct

import pytest

from strom.wire.apis import request_header_version, response_header_version
from strom.wire.connection import (
    CLOSED,
    NEED_DATA,
    Connection,
    Request,
    UnsupportedRequest,
    encode_response,
)
from strom.wire.errors import ProtocolError
from strom.wire.formats.protocol.request_header import RequestHeader
from strom.wire.formats.protocol.response_header import ResponseHeader
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse


def frame(header: RequestHeader, header_version: int, body: bytes) -> bytes:
    payload = header.encode(header_version) + body
    return struct.pack(">i", len(payload)) + payload


def test_client_id_is_never_compact() -> None:
    v1 = RequestHeader(3, 12, 5, "client").encode(1)
    v2 = RequestHeader(3, 12, 5, "client").encode(2)
    assert v1[8:10] == b"\x00\x06"  # int16 length, not a varint
    assert v2 == v1 + b"\x00"  # v2 only adds the (empty) tagged-field section


def test_header_v0_has_no_client_id() -> None:
    assert RequestHeader(7, 0, 1, "").encode(0) == b"\x00\x07\x00\x00\x00\x00\x00\x01"


def test_header_versions() -> None:
    assert request_header_version(3, 8) == 1
    assert request_header_version(3, 9) == 2
    assert response_header_version(3, 9) == 1
    assert response_header_version(3, 8) == 0
    assert response_header_version(18, 3) == 0  # KIP-511: ApiVersions always v0
    assert request_header_version(18, 3) == 2


def test_requests_arrive_in_pieces_and_pipelined() -> None:
    conn = Connection()
    data = b"".join(
        frame(RequestHeader(3, 12, corr, "c"), 2, MetadataRequest(topics=None).encode(12))
        for corr in range(3)
    )
    for i in range(len(data)):
        conn.receive_data(data[i : i + 1])
    seen = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            break
        assert isinstance(event, Request)
        assert isinstance(event.body, MetadataRequest)
        assert event.body.topics is None
        seen.append(event.header.correlation_id)
    assert seen == [0, 1, 2]
    conn.receive_data(b"")
    assert conn.next_event() is CLOSED


def test_oversized_frame_is_refused_before_buffering() -> None:
    conn = Connection(max_frame_size=100)
    with pytest.raises(ProtocolError):
        conn.receive_data(struct.pack(">i", 101))
    assert conn.buffered == 4


def test_negative_frame_size() -> None:
    conn = Connection()
    with pytest.raises(ProtocolError):
        conn.receive_data(b"\xff\xff\xff\xfe")


def test_eof_inside_a_frame() -> None:
    conn = Connection()
    conn.receive_data(b"\x00\x00\x00\x10abc")
    conn.receive_data(b"")
    with pytest.raises(ProtocolError):
        conn.next_event()


def test_unsupported_version_keeps_correlation_id() -> None:
    conn = Connection()
    conn.receive_data(frame(RequestHeader(18, 99, 42, "future"), 2, b"\x00garbage"))
    event = conn.next_event()
    assert isinstance(event, UnsupportedRequest)
    assert event.header.correlation_id == 42
    assert event.header.client_id == "future"


def test_api_versions_response_uses_header_v0() -> None:
    body = ApiVersionsResponse(error_code=0, api_keys=[ApiVersionsResponse.ApiVersion(0, 3, 12)])
    data = b"".join(encode_response(18, 3, 77, body))
    size, corr = struct.unpack_from(">ii", data)
    assert size == len(data) - 4
    assert corr == 77
    assert ApiVersionsResponse.decode(data[8:], 3) == body  # no tagged byte after correlation id


def test_flexible_response_header_has_tags() -> None:
    data = b"".join(encode_response(3, 12, 5, MetadataResponse()))
    header, pos = ResponseHeader.decode_from(data, 4, 1)
    assert header.correlation_id == 5
    assert pos == 9
    assert MetadataResponse.decode(data[pos:], 12) == MetadataResponse()


def test_send_response_round_trip() -> None:
    conn = Connection()
    conn.receive_data(frame(RequestHeader(18, 3, 9, "c"), 2, ApiVersionsRequest("x", "1").encode(3)))
    event = conn.next_event()
    assert isinstance(event, Request)
    out = conn.send_response(event, ApiVersionsResponse(error_code=35))
    assert struct.unpack_from(">i", out, 4)[0] == 9


def test_client_connection_matches_responses_in_order() -> None:
    from strom.wire.connection import ClientConnection

    client = ClientConnection("me")
    server = Connection()
    server.receive_data(client.send_request(MetadataRequest(topics=None), 12))
    server.receive_data(client.send_request(ApiVersionsRequest("a", "1"), 3))
    first, second = server.next_event(), server.next_event()
    assert isinstance(first, Request)
    assert isinstance(second, Request)
    assert first.header.client_id == "me"
    client.receive_data(server.send_response(first, MetadataResponse(cluster_id="c")))
    client.receive_data(server.send_response(second, ApiVersionsResponse(error_code=0)))
    corr1, body1 = client.next_response()  # type: ignore[misc]
    corr2, body2 = client.next_response()  # type: ignore[misc]
    assert (corr1, corr2) == (0, 1)
    assert isinstance(body1, MetadataResponse)
    assert body1.cluster_id == "c"
    assert isinstance(body2, ApiVersionsResponse)
    assert client.next_response() is NEED_DATA


def test_frames_split_anywhere_across_two_receives() -> None:
    payloads = [b"a" * 5, b"", b"bc" * 40]
    data = b"".join(len(p).to_bytes(4, "big") + p for p in payloads)
    for cut in range(len(data) + 1):
        conn = Connection()
        got: list[bytes] = []
        for piece in (data[:cut], data[cut:]):
            if piece:
                conn.receive_data(piece)
            while True:
                f = conn.next_frame()
                if f is NEED_DATA:
                    break
                assert isinstance(f, bytes | memoryview)
                got.append(bytes(f))
        assert got == payloads, cut
        assert conn.buffered == 0
        conn.receive_data(b"")
        assert conn.next_frame() is CLOSED


def test_whole_frames_in_one_receive_are_views_without_a_copy() -> None:
    data = b"\x00\x00\x00\x02hi\x00\x00\x00\x01!\x00\x00"
    conn = Connection()
    conn.receive_data(data)
    first, second = conn.next_frame(), conn.next_frame()
    assert isinstance(first, memoryview)
    assert first.obj is data
    assert bytes(first) == b"hi"
    assert isinstance(second, memoryview)
    assert bytes(second) == b"!"
    assert conn.next_frame() is NEED_DATA
    assert conn.buffered == 2
    conn.receive_data(bytearray(b"\x00\x01z"))  # the partial frame is completed from a copy
    assert conn.next_frame() == b"z"
    assert bytes(first) == b"hi"  # earlier frames stay valid
