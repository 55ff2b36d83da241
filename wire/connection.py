"""Sans-IO Kafka connection framing, in the style of h11.

Feed received bytes with `receive_data()` (b"" at end of stream); pull
complete requests with `next_event()`; turn responses into bytes with
`send_response()`. Every frame is an int32 size then that many bytes. A frame
longer than `max_frame_size` is refused as soon as its size is read, before any
of it is buffered. No sockets, no trio, no clock here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strom.wire.apis import (
    is_supported,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.formats.protocol.request_header import RequestHeader
from strom.wire.formats.protocol.response_header import ResponseHeader
from strom.wire.message import Message
from strom.wire.primitives import INT16, INT32

DEFAULT_MAX_FRAME_SIZE = 104857600  # Kafka's socket.request.max.bytes


class NeedData:
    """`next_event()` needs more bytes before it can return a request."""


class Closed:
    """The peer closed its side and every complete frame was consumed."""


NEED_DATA = NeedData()
CLOSED = Closed()


@dataclass(slots=True)
class Request:
    """A decoded request: its header and body."""

    header: RequestHeader
    body: Message
    size: int


@dataclass(slots=True)
class UnsupportedRequest:
    """A frame whose API key or version this side does not implement.

    The header's key, version and correlation id are still known, so the
    broker can answer (ApiVersions falls back to v0, KIP-511).
    """

    header: RequestHeader
    size: int


Event = Request | UnsupportedRequest | NeedData | Closed


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Decode just the request header; return it and the body's offset."""
    if len(frame) < 4:
        raise ProtocolError("request shorter than its header", ErrorCode.INVALID_REQUEST)
    api_key = INT16.unpack_from(frame, 0)[0]
    api_version = INT16.unpack_from(frame, 2)[0]
    return RequestHeader.decode_from(frame, 0, request_header_version(api_key, api_version))


def decode_request(frame: bytes | memoryview) -> Request | UnsupportedRequest:
    """Decode a whole request frame (without its size prefix)."""
    header, offset = decode_request_header(frame)
    if not is_supported(header.request_api_key, header.request_api_version):
        return UnsupportedRequest(header, len(frame))
    cls = request_class(header.request_api_key)
    try:
        body = cls.decode_from(frame, offset, header.request_api_version)[0]
    except ProtocolError as exc:
        raise ProtocolError(str(exc), ErrorCode.INVALID_REQUEST) from exc
    return Request(header, body, len(frame))


def encode_response(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Message,
    body_version: int | None = None,
) -> list[Any]:
    """Size-prefixed response chunks; records fields stay uncopied for writev.

    `body_version` differs from `api_version` only for the ApiVersions v0
    fallback, where the body is written at v0 whatever the request said.
    """
    chunks: list[Any] = [b""]
    header_version = response_header_version(api_key, api_version)
    ResponseHeader(correlation_id).encode_into(header_version, chunks)
    body.encode_into(api_version if body_version is None else body_version, chunks)
    chunks[0] = INT32.pack(sum(map(len, chunks)))
    return chunks


class Connection:
    """The server side of one Kafka connection: frames in, responses out."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        # Frames are handed out without copying where possible. `_buffer` holds the
        # frame at the head when it spans receives; it is filled only up to that
        # frame's end when the size is known, and then given away whole (a view of
        # it, and a fresh `_buffer` for us). Received `bytes` past the head frame
        # stay as they are (`_data` from `_pos`), and whole frames in them are
        # returned as views. Only a partial frame at the end of `_data` is copied
        # into `_buffer`. Invariant: while `_data` is set, `_buffer` is empty or
        # holds exactly one complete frame.
        self._buffer = bytearray()
        self._data: bytes | None = None
        self._pos = 0
        self._eof = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        rest = 0 if self._data is None else len(self._data) - self._pos
        return len(self._buffer) + rest

    def pending_frame_size(self) -> int | None:
        """Bytes (size prefix included) of the incomplete frame at the head, once its size is in.

        None when no frame is partly received, or its size prefix is not yet complete; a
        server reserves this much memory before reading the rest of the frame.
        """
        size = self._check_size()
        if size is None or 4 + size <= self.buffered:
            return None
        return 4 + size

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes; empty data means the peer closed its side."""
        if not data:
            self._eof = True
            return
        if self._eof:
            raise RuntimeError("receive_data after end of stream")
        self._spill()
        buffer = self._buffer
        if type(data) is bytes:
            if not buffer:
                self._data, self._pos = data, 0
                self._check_size()
                return
            size = self._check_size()
            if size is not None:
                need = 4 + size - len(buffer)
                if 0 <= need < len(data):  # completes the head frame, and more follows
                    buffer += memoryview(data)[:need]
                    self._data, self._pos = data, need
                    return
        buffer += data
        self._check_size()

    def _spill(self) -> None:
        """Move the unconsumed rest of `_data` into `_buffer`."""
        if self._data is not None:
            self._buffer += memoryview(self._data)[self._pos :]
            self._data = None

    def _check_size(self) -> int | None:
        """The head frame's size, once its prefix is in; refuses bad sizes at once."""
        buffer = self._buffer
        if buffer:
            if len(buffer) < 4:
                return None
            size: int = INT32.unpack_from(buffer, 0)[0]
        elif self._data is not None and len(self._data) - self._pos >= 4:
            size = INT32.unpack_from(self._data, self._pos)[0]
        else:
            return None
        if size < 0:
            raise ProtocolError(f"negative frame size {size}", ErrorCode.INVALID_REQUEST)
        if size > self.max_frame_size:
            raise ProtocolError(
                f"frame of {size} bytes exceeds the maximum of {self.max_frame_size}",
                ErrorCode.INVALID_REQUEST,
            )
        return size

    def next_frame(self) -> bytes | memoryview | NeedData | Closed:
        """The next complete frame without its size prefix.

        A view (of the received bytes, or of a buffer given away with it) when
        possible, else a `bytes` copy; either way it stays valid for good.
        """
        size = self._check_size()
        buffer = self._buffer
        if size is not None:
            end = 4 + size
            if buffer:
                if len(buffer) == end:
                    self._buffer = bytearray()
                    return memoryview(buffer)[4:]
                if len(buffer) > end:
                    with memoryview(buffer) as view:
                        frame = bytes(view[4:end])
                    del buffer[:end]
                    return frame
            elif self._data is not None:
                data = self._data
                start = self._pos + 4
                end += self._pos
                if end <= len(data):
                    self._pos = end
                    if end == len(data):
                        self._data = None
                    return memoryview(data)[start:end]
                self._spill()
        elif not buffer and self._data is not None:
            self._spill()  # fewer than 4 bytes left
        if self._eof:
            if self.buffered:
                raise ProtocolError("connection closed inside a frame", ErrorCode.INVALID_REQUEST)
            return CLOSED
        return NEED_DATA

    def next_event(self) -> Event:
        frame = self.next_frame()
        if isinstance(frame, NeedData | Closed):
            return frame
        return decode_request(frame)

    def send_response(self, request: Request | UnsupportedRequest, body: Message) -> bytes:
        header = request.header
        return b"".join(
            encode_response(
                header.request_api_key, header.request_api_version, header.correlation_id, body
            )
        )


class ClientConnection:
    """The client side: requests out, responses matched to them by correlation id.

    Kafka answers requests on one connection in order; a response whose
    correlation id is not the oldest outstanding one is a protocol error.
    Requests that expect no response (Produce with acks=0) are not tracked.
    """

    def __init__(
        self, client_id: str | None = "strom", max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    ) -> None:
        self.client_id = client_id
        self._frames = Connection(max_frame_size)
        self._next_correlation = 0
        self._pending: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    def send_request(
        self,
        body: Message,
        version: int,
        expect_response: bool = True,
        correlation_id: int | None = None,
    ) -> bytes:
        """The request's frame; `correlation_id` is the caller's (the Raft driver pairs
        responses by its own request ids), else the next of this connection's counter."""
        api_key = body.API_KEY
        if api_key is None:
            raise ValueError(f"{body.NAME} is not a request")
        if correlation_id is None:
            correlation = self._next_correlation
            self._next_correlation = (correlation + 1) & 0x7FFFFFFF
        else:
            correlation = correlation_id & 0x7FFFFFFF
        chunks: list[Any] = [b""]
        header = RequestHeader(api_key, version, correlation, self.client_id)
        header.encode_into(request_header_version(api_key, version), chunks)
        body.encode_into(version, chunks)
        chunks[0] = INT32.pack(sum(map(len, chunks)))
        if expect_response:
            self._pending.append((correlation, api_key, version))
        return b"".join(chunks)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.receive_data(data)

    def next_response(self) -> tuple[int, Message] | NeedData | Closed:
        """The next (correlation id, response body), decoded at the request's version."""
        frame = self._frames.next_frame()
        if isinstance(frame, NeedData | Closed):
            return frame
        if not self._pending:
            raise ProtocolError("response with no request outstanding", ErrorCode.CORRUPT_MESSAGE)
        correlation, api_key, version = self._pending.pop(0)
        header, pos = ResponseHeader.decode_from(
            frame, 0, response_header_version(api_key, version)
        )
        if header.correlation_id != correlation:
            raise ProtocolError(
                f"expected correlation id {correlation}, got {header.correlation_id}",
                ErrorCode.CORRUPT_MESSAGE,
            )
        return correlation, response_class(api_key).decode_from(frame, pos, version)[0]
