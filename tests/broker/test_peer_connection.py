"""PeerConnection: a caller cancelled from outside mid-request leaves no answer to the next one.

The peer here answers each request only when the test lets it, so a request can be left on the
wire when its caller's own scope (not the request's timeout) cancels it. The answer that comes
later belongs to that abandoned request; the next caller on the same PeerConnection must get
the answer to its own request, never that one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import pytest
import trio

from strom.broker.drivers.peer import PeerConnection
from strom.config.quorum import Address
from strom.wire.connection import Connection, Request
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

pytestmark = pytest.mark.trio

VERSION = 3


class HeldPeer:
    """Answers ApiVersions with `throttle_time_ms` = the request's correlation id, each answer
    only once the test calls `release` (connections counted)."""

    def __init__(self) -> None:
        self.address = Address("127.0.0.1", 0)
        self.connections = 0
        self.received = trio.Event()
        self._release = trio.Semaphore(0)

    def release(self) -> None:
        self._release.release()

    async def serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        conn = Connection()
        async with stream:
            while True:
                event = conn.next_event()
                if isinstance(event, Request):
                    self.received.set()
                    await self._release.acquire()
                    answer = ApiVersionsResponse(throttle_time_ms=event.header.correlation_id)
                    try:
                        await stream.send_all(conn.send_response(event, answer))
                    except trio.BrokenResourceError:
                        return
                    continue
                try:
                    data = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return
                if not data:
                    return
                conn.receive_data(data)


@asynccontextmanager
async def held_peer() -> AsyncIterator[HeldPeer]:
    peer = HeldPeer()
    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(trio.serve_tcp, peer.serve, 0, host="127.0.0.1"))
        assert isinstance(listener, trio.SocketListener)
        peer.address = Address("127.0.0.1", listener.socket.getsockname()[1])
        yield peer
        nursery.cancel_scope.cancel()


async def test_a_request_cancelled_from_outside_leaves_no_answer_for_the_next() -> None:
    async with held_peer() as peer:
        connection = PeerConnection(peer.address, "test")
        with trio.CancelScope() as outside:
            async with trio.open_nursery() as nursery:

                async def cancel_once_sent() -> None:
                    await peer.received.wait()
                    outside.cancel()

                nursery.start_soon(cancel_once_sent)
                await connection.request(ApiVersionsRequest(), VERSION, 1, timeout_s=10)
        assert outside.cancelled_caught
        peer.release()  # the abandoned request's answer goes out now, if anyone still listens
        peer.release()  # and the next request's
        response = await connection.request(ApiVersionsRequest(), VERSION, 2, timeout_s=10)
        assert isinstance(response, ApiVersionsResponse)
        assert response.throttle_time_ms == 2  # its own answer, not request 1's
        assert peer.connections == 2  # the cancelled request's connection was closed
        await connection.aclose()


async def test_requests_share_one_connection_when_nothing_is_cancelled() -> None:
    async with held_peer() as peer:
        connection = PeerConnection(peer.address, "test")
        for correlation_id in (7, 8, 9):
            peer.release()
            response = await connection.request(
                ApiVersionsRequest(), VERSION, correlation_id, timeout_s=10
            )
            assert isinstance(response, ApiVersionsResponse)
            assert response.throttle_time_ms == correlation_id
        assert peer.connections == 1
        await connection.aclose()
