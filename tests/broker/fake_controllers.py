"""Stand-ins for controllers that are not the active one, for the remote-controller tests.

`not_controller` answers every request as a non-active Kafka controller does (NOT_CONTROLLER in
the response); `hang_up` accepts connections and closes them at once (an unreachable
controller). Both bind port 0, count what they got, and set `answered` after each request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

import trio

from strom.broker.admin.forwarding import error_response
from strom.config.quorum import Address
from strom.wire.connection import Connection, Request
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)


@dataclass
class FakeController:
    address: Address = field(default_factory=lambda: Address("127.0.0.1", 0))
    requests: int = 0
    answered: trio.Event = field(default_factory=trio.Event)
    """Set after each request (a test may put its own event here)."""

    def _note(self) -> None:
        self.requests += 1
        self.answered.set()


def _not_controller(request: Request) -> Message:
    body = request.body
    if isinstance(body, BrokerRegistrationRequest):
        return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
    if isinstance(body, BrokerHeartbeatRequest):
        return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return error_response(
        body, request.header.request_api_version, ErrorCode.NOT_CONTROLLER, Message
    )


@asynccontextmanager
async def _serving(fake: FakeController, answer: bool) -> AsyncIterator[FakeController]:
    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            if not answer:
                fake._note()
                return
            conn = Connection()
            while True:
                event = conn.next_event()
                if isinstance(event, Request):
                    await stream.send_all(conn.send_response(event, _not_controller(event)))
                    fake._note()
                    continue
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        assert isinstance(listener, trio.SocketListener)
        fake.address = Address("127.0.0.1", listener.socket.getsockname()[1])
        yield fake
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def not_controller() -> AsyncIterator[FakeController]:
    async with _serving(FakeController(), answer=True) as fake:
        yield fake


@asynccontextmanager
async def hang_up() -> AsyncIterator[FakeController]:
    async with _serving(FakeController(), answer=False) as fake:
        yield fake


def dead_address() -> Address:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return Address("127.0.0.1", port)
