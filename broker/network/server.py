"""The trio TCP server: one task per connection, requests answered in order.

Each connection runs a loop over a sans-IO `wire.Connection`: read bytes,
pull complete requests, run the handler, write the response. Requests on one
connection are handled one at a time, in order (as Kafka does), while clients
pipeline as many as they like; a long-polling fetch holds up only its own
connection. A malformed request closes that connection alone; a handler that
fails answers UNKNOWN_SERVER_ERROR where the response has a top-level error
code (`error_response`), else closes the connection, and logs one line.

Shutdown: connections waiting for a request stop at once; one in the middle
of a request finishes it and sends the response, then stops.
"""

from __future__ import annotations

import errno
import itertools
import logging
import time
from typing import Any

import trio

from strom.broker.handlers import HANDLERS, listener_type
from strom.broker.handlers.api_versions import API_KEY as API_VERSIONS_KEY
from strom.broker.handlers.api_versions import supported_versions
from strom.broker.handlers.request import RequestContext
from strom.broker.network.error_response import error_response
from strom.broker.network.faults import FaultInjector
from strom.broker.network.memory_pool import request_memory_pool
from strom.broker.network.send import has_file_chunks, send_chunks
from strom.broker.state import BrokerState
from strom.wire.connection import (
    CLOSED,
    NEED_DATA,
    Connection,
    Request,
    UnsupportedRequest,
    encode_response,
)
from strom.wire.errors import ErrorCode, ProtocolError

log = logging.getLogger("strom.server")

RECEIVE_SIZE = 256 * 1024
_ACCEPT_CAPACITY_ERRORS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
"""accept() failures that mean "no capacity right now": wait and retry, as trio's serve_listeners."""
_connection_ids = itertools.count(1)


class Server:
    """Accepts connections on bound listeners and serves them until stopped."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.stopping = False
        self._waiting: set[trio.CancelScope] = set()
        self._per_ip: dict[str, int] = {}
        config = state.config
        bound = config.queued_max_request_bytes
        if bound > 0 and "queued.max.request.bytes" not in config.explicit_keys:
            bound = max(bound, config.socket_request_max_bytes)  # Strom's default fits any frame
        self.memory = request_memory_pool(bound)
        self.connections = 0
        self.recording = config.metrics_endpoint is not None
        """Record request metrics (only when something exports them: metrics.listener)."""
        self.faults: FaultInjector | None = None
        """Request fault injection, set only in a process a test harness started
        (`strom.broker.network.faults`); None otherwise."""
        self.connections_by_listener: dict[str, int] = {}
        """Open connections per listener name (the metrics' connection-count)."""
        self._slot_freed = trio.lowlevel.ParkingLot()

    async def serve_listener(
        self, listener: trio.SocketListener, name: str, connections: trio.Nursery
    ) -> None:
        """Accept connections while fewer than `max.connections` are open.

        At the limit the broker stops accepting (new clients wait in the listen backlog) until a
        connection closes, as Kafka's acceptor waits for a connection slot.
        """
        limit = self.state.config.max_connections
        async with listener:  # closed when serving stops
            while True:
                while self.connections >= limit:
                    await self._slot_freed.park()
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in _ACCEPT_CAPACITY_ERRORS:
                        raise
                    log.error("accept on %s failed (%s); retrying in 100 ms", name, exc.strerror)
                    await trio.sleep(0.1)
                    continue
                self.connections += 1
                connections.start_soon(self._connection, stream, name)

    async def _connection(self, stream: trio.SocketStream, name: str) -> None:
        by_listener = self.connections_by_listener
        by_listener[name] = by_listener.get(name, 0) + 1
        self.state.metrics.connections_created += 1
        try:
            await self.handle_stream(stream, name)
        finally:
            self.connections -= 1
            by_listener[name] -= 1
            self.state.metrics.connections_closed += 1
            self._slot_freed.unpark_all()

    def stop_accepting_requests(self) -> None:
        """Wake every connection that is waiting for a request so it closes."""
        self.stopping = True
        for scope in list(self._waiting):
            scope.cancel()

    async def handle_stream(self, stream: trio.SocketStream, listener: str) -> None:
        host = _peer_host(stream)
        limit = self.state.config.max_connections_per_ip
        if self._per_ip.get(host, 0) >= limit:
            log.warning("refusing connection from %s: max.connections.per.ip=%d reached", host, limit)
            await trio.aclose_forcefully(stream)
            return
        self._per_ip[host] = self._per_ip.get(host, 0) + 1
        conn_id = next(_connection_ids)
        try:
            await self._serve(stream, host, conn_id, listener)
        except ProtocolError as exc:
            log.info("closing connection %d from %s: %s", conn_id, host, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.debug("connection %d from %s went away", conn_id, host)
        finally:
            self._per_ip[host] -= 1
            if not self._per_ip[host]:
                del self._per_ip[host]
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.SocketStream, host: str, conn_id: int, listener: str) -> None:
        config = self.state.config
        conn = Connection(max_frame_size=config.socket_request_max_bytes)
        idle_seconds = config.connections_max_idle_ms / 1000
        reserved = 0  # of self.memory, for the frame being read; given back once it is answered
        received = time.perf_counter()  # when the last bytes arrived: requests in them queue from then
        try:
            while True:
                event = conn.next_event()
                if event is NEED_DATA:
                    if self.stopping:
                        return
                    with trio.move_on_after(idle_seconds) as scope:
                        self._waiting.add(scope)
                        try:
                            pending = conn.pending_frame_size()
                            if pending is not None and pending > reserved:
                                await self.memory.reserve(pending - reserved)
                                reserved = pending
                            data = await stream.receive_some(RECEIVE_SIZE)
                        finally:
                            self._waiting.discard(scope)
                    if scope.cancelled_caught:
                        if not self.stopping:
                            log.info("closing idle connection %d from %s", conn_id, host)
                        return
                    conn.receive_data(data)
                    received = time.perf_counter()
                    continue
                if event is CLOSED:
                    return
                assert isinstance(event, Request | UnsupportedRequest)
                chunks = await self.dispatch(event, host, conn_id, listener, received)
                if chunks is not None:
                    if has_file_chunks(chunks):
                        await send_chunks(stream, chunks)
                    else:
                        await stream.send_all(b"".join(chunks))
                self.memory.release(reserved)
                reserved = 0
        finally:
            self.memory.release(reserved)

    async def dispatch(
        self,
        event: Request | UnsupportedRequest,
        host: str,
        conn_id: int,
        listener: str,
        received: float | None = None,
    ) -> list[Any] | None:
        """Run the request's handler; return the response chunks, or None for no response.
        `received`: `time.perf_counter()` when the request's last bytes arrived (its queue time
        for the metrics starts there)."""
        header = event.header
        key, version = header.request_api_key, header.request_api_version
        kind = listener_type(listener in self.state.config.controller_listeners)
        handler = HANDLERS.get(key)
        if handler is not None and not handler.serves(kind):
            # Kafka's SocketServer: an API its listener does not enable closes the connection.
            raise ProtocolError(
                f"API key {key} is not enabled on {kind} listener {listener} "
                f"(client {header.client_id!r})",
                ErrorCode.INVALID_REQUEST,
            )
        if isinstance(event, UnsupportedRequest) or handler is None or not handler.supports(version):
            if key == API_VERSIONS_KEY:
                # KIP-511: answer a too-new ApiVersions at v0 with what we support.
                body = supported_versions(ErrorCode.UNSUPPORTED_VERSION, kind)
                return encode_response(key, version, header.correlation_id, body, body_version=0)
            raise ProtocolError(
                f"unsupported API key {key} version {version} from client {header.client_id!r}",
                ErrorCode.UNSUPPORTED_VERSION,
            )
        request = RequestContext(
            key, version, header.correlation_id, header.client_id, host, conn_id, listener
        )
        started = time.perf_counter()
        try:
            if self.faults is None:
                response = await handler.handle(self.state, request, event.body)
            else:
                response = await self.faults.handle(
                    key, version, event.body, self._topic_of_id,
                    lambda body: handler.handle(self.state, request, body),
                )  # fmt: skip
        except ProtocolError:
            raise
        except Exception as exc:
            response = error_response(key, version, ErrorCode.UNKNOWN_SERVER_ERROR)
            log.error(
                "handler for API key %d v%d failed (%s; %s): %s: %s",
                key, version, _raised_at(exc),
                "answered UNKNOWN_SERVER_ERROR" if response is not None else "closing the connection",
                type(exc).__name__, exc,
            )  # fmt: skip
            log.debug("handler failure", exc_info=exc)
            if response is None:
                raise ProtocolError(f"internal error: {exc}", ErrorCode.UNKNOWN_SERVER_ERROR) from exc
        if self.recording:
            self.state.metrics.record_request(
                key, version, event.body, response,
                (started - received) * 1000 if received is not None else 0.0,
                (time.perf_counter() - (started if received is None else received)) * 1000,
                self._topic_of_id,
            )  # fmt: skip
        if response is None:
            return None
        return encode_response(key, version, header.correlation_id, response)

    def _topic_of_id(self, topic_id: Any) -> str | None:
        topic = self.state.image.topic_by_id(topic_id)
        return None if topic is None else topic.name


def _raised_at(exc: BaseException) -> str:
    """`file:line` where `exc` was raised: enough to find a bug from one log line."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"


def _peer_host(stream: trio.SocketStream) -> str:
    try:
        peer = stream.socket.getpeername()
    except OSError:
        return "?"
    return str(peer[0]) if isinstance(peer, tuple) else str(peer)
