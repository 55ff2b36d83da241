"""The trio TCP server: one task per connection, requests answered in order.

Each connection runs a loop over a sans-IO `wire.Connection`: read bytes,
pull complete requests, run the handler, write the response. Requests on one
connection are handled one at a time, in order (as Kafka does), while clients
pipeline as many as they like; a long-polling fetch holds up only its own
connection. A malformed request closes that connection alone; a handler that
fails answers UNKNOWN_SERVER_ERROR where the response has a top-level error
code (`error_response`), else closes the connection, and logs one line.

One exception, for throughput: an acks=all Produce that has appended its records and waits
for its replicas defers its answer (`Deferred`), and the loop reads on. A Produce after it is
appended at once, so one replication round carries both (Kafka would append it only after the
first is answered: a round per request). Answers go out in the requests' order, from a task
per deferred answer; any other request (a SASL re-authentication too) is handled only after
every answer before it is sent, so what it sees is what it would see on Kafka. At most
`MAX_DEFERRED_ANSWERS` per connection; none while client quotas exist (they throttle by the
answer).

Shutdown: connections waiting for a request stop at once; one in the middle
of a request finishes it and sends the response (and every deferred answer), then stops.
"""

from __future__ import annotations

import errno
import itertools
import logging
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from strom.broker import runtime
from strom.broker.handlers import HANDLERS, listener_type
from strom.broker.handlers.api_versions import API_KEY as API_VERSIONS_KEY
from strom.broker.handlers.api_versions import supported_versions
from strom.broker.handlers.request import Deferred, RequestContext
from strom.broker.network.error_response import error_response
from strom.broker.network.faults import FaultInjector
from strom.broker.network.loop_time import LoopTime
from strom.broker.network.memory_pool import request_memory_pool
from strom.broker.network.send import has_file_chunks, send_chunks, send_copied
from strom.broker.runtime import StreamListener
from strom.broker.security.authorization import (
    CHECKED_BY_HANDLER,
    CLUSTER_CHECKS,
    EXEMPT_APIS,
    allowed,
    is_super_user,
)
from strom.broker.security.listeners import ListenerTls, handshake
from strom.broker.security.principal import ANONYMOUS, KafkaPrincipal
from strom.broker.security.quotas import (
    FETCH,
    PRODUCE,
    REQUEST,
    FetchQuota,
    IpConnectionQuotas,
    has_quota,
)
from strom.broker.security.sasl import SASL_AUTHENTICATE, Action, Authenticator, Verdict
from strom.broker.security.sasl_listeners import SaslListeners
from strom.broker.state import BrokerState
from strom.config import BrokerConfig
from strom.config.values import INT_MAX
from strom.coordinator.metadata.acls import ResourceType
from strom.wire.connection import (
    CLOSED,
    NEED_DATA,
    Connection,
    Request,
    UnsupportedRequest,
    encode_response,
)
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.primitives import INT32

log = logging.getLogger("strom.server")

RECEIVE_SIZE = 256 * 1024
_ACCEPT_CAPACITY_ERRORS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
"""accept() failures that mean "no capacity right now": wait and retry, as trio's serve_listeners."""
_connection_ids = itertools.count(1)


PRODUCE_KEY, FETCH_KEY, OFFSET_FOR_LEADER_EPOCH_KEY = 0, 1, 23
CLUSTER_ACTION_KEYS = frozenset({4, 5, 6, 7, 27, 52, 53, 54, 55, 56, 57, 58, 62, 63, 67})
"""Kafka's cluster-action APIs (LeaderAndIsr ... AllocateProducerIds): the cluster's own
requests, exempt from request-time quotas as in Kafka."""


class TokenBucket:
    """At most `rate` takes per second, bursts up to `rate` (KIP-612's connection creation
    rate, over a one-second window); `take()` returns how long to wait first (0: none)."""

    def __init__(self, rate: int, clock: Callable[[], float]) -> None:
        self.rate = rate
        self._clock = clock
        self._tokens = float(rate)
        self._at = clock()

    def take(self) -> float:
        if self.rate >= INT_MAX:
            return 0.0
        now = self._clock()
        self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= 1
        if self._tokens >= 0 or self.rate == 0:
            return 0.0 if self.rate else float("inf")
        return -self._tokens / self.rate


class Server:
    """Accepts connections on bound listeners and serves them until stopped."""

    def __init__(
        self, state: BrokerState, tls: ListenerTls | None = None, sasl: SaslListeners | None = None
    ) -> None:
        self.state = state
        self.tls = tls
        self.sasl = sasl
        """The SASL mechanisms of SASL listeners (None: no listener uses SASL)."""
        self.loop_time = LoopTime()
        """The event-loop time of each connection, while some request_percentage quota exists."""
        self._quotas_seen: object = None
        self.stopping = False
        self._waiting: dict[trio.CancelScope, float] = {}
        """Connections waiting for a request: their scope, and trio time since when."""
        self._reaping = False
        self._per_ip: dict[str, int] = {}
        self._limits_of: Mapping[str, int] = {}  # the overrides `_limits` were resolved from
        self._limits: Mapping[str, int] = {}
        self.ip_rates = IpConnectionQuotas(trio.current_time)
        """Connections made per address, against the ip entities' connection_creation_rate."""
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
        self, listener: StreamListener, name: str, connections: trio.Nursery
    ) -> None:
        """Accept connections while fewer than `max.connections` are open, on the broker and
        on this listener (`listener.name.<l>.max.connections`).

        At a limit the listener stops accepting (new clients wait in the listen backlog) until a
        connection closes or the limit is raised, as Kafka's acceptor waits for a slot.
        """
        rate = self.state.config.listener_value(name, "max.connection.creation.rate")
        assert isinstance(rate, int)
        bucket = TokenBucket(rate, trio.current_time)
        async with listener, trio.open_nursery() as own:  # closed when serving stops
            if not self._reaping:
                self._reaping = True
                own.start_soon(self._reap_idle)
            while True:
                while self._at_connection_limit(name):
                    with trio.move_on_after(1):  # and look again: a limit may be raised
                        await self._slot_freed.park()
                wait = bucket.take()
                if wait > 0:  # KIP-612: the acceptor waits out a burst of new connections
                    await trio.sleep(wait)
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in _ACCEPT_CAPACITY_ERRORS:
                        raise
                    log.error("accept on %s failed (%s); retrying in 100 ms", name, exc.strerror)
                    await trio.sleep(0.1)
                    continue
                host = runtime.current().network.peer_host(stream)
                # a node whose controller is not yet running (a voter starting) has no quotas
                controller = self.state.controller
                quotas = controller.image.client_quotas if controller is not None else {}
                throttle_ms = self.ip_rates.admit(quotas, host)
                if throttle_ms:  # KIP-612: over its ip's rate; held, unserved, then closed
                    log.debug("delaying the close of a connection from %s by %d ms", host, throttle_ms)
                    connections.start_soon(_close_after, stream, throttle_ms / 1000)
                    continue
                self.connections += 1
                by_listener = self.connections_by_listener
                by_listener[name] = by_listener.get(name, 0) + 1
                connections.start_soon(self._connection, stream, name)

    def _at_connection_limit(self, listener: str) -> bool:
        """Whether `max.connections` is reached, broker-wide or on `listener`
        (`listener.name.<l>.max.connections`); read each time, as both may change."""
        config = self.state.effective_config
        if self.connections >= config.max_connections:
            return True
        limit = config.listener_value(listener, "max.connections")
        assert isinstance(limit, int)
        return self.connections_by_listener.get(listener, 0) >= limit

    async def _connection(self, stream: trio.abc.Stream, name: str) -> None:
        """Serve an accepted connection (counted by the acceptor) and give its slot back."""
        self.state.metrics.connections_created += 1
        try:
            await self.handle_stream(stream, name)
        finally:
            self.connections -= 1
            self.connections_by_listener[name] -= 1
            self.state.metrics.connections_closed += 1
            self._slot_freed.unpark_all()

    async def _reap_idle(self) -> None:
        """Close connections that waited `connections.max.idle.ms` for a request (looked for
        every tenth of it, so one closes after 1-1.1 times it). One task for the server, not a
        deadline per request: a cancel scope's deadline costs each request several µs.
        A negative value turns idle expiry off, as in Kafka's Selector."""
        idle = self.state.config.connections_max_idle_ms / 1000
        if idle < 0:
            return
        period = max(idle / 10, 0.001)  # 0 closes any idle connection, without a busy loop
        try:
            while True:
                await trio.sleep(period)
                now = trio.current_time()
                for scope, since in list(self._waiting.items()):
                    if now - since >= idle:
                        scope.cancel()
        finally:
            self._reaping = False

    async def _per_ip_limit(self, host: str) -> int:
        """max.connections.per.ip, or `host`'s own limit from max.connections.per.ip.overrides
        (a host name there stands for the addresses it resolves to when the setting takes
        effect, as in Kafka)."""
        config = self.state.effective_config
        overrides = config.connections_per_ip_overrides
        if overrides != self._limits_of:  # resolved again only when the setting changes
            limits = await runtime.to_thread(resolve_overrides, overrides) if overrides else {}
            self._limits_of, self._limits = overrides, limits
        return self._limits.get(host, config.max_connections_per_ip)

    def stop_accepting_requests(self) -> None:
        """Wake every connection that is waiting for a request so it closes."""
        self.stopping = True
        for scope in list(self._waiting):
            scope.cancel()

    async def handle_stream(self, stream: trio.abc.Stream, listener: str) -> None:
        host = runtime.current().network.peer_host(stream)
        limit = await self._per_ip_limit(host)
        if self._per_ip.get(host, 0) >= limit:
            log.warning("refusing connection from %s: its limit of %d connections is reached "
                        "(max.connections.per.ip, max.connections.per.ip.overrides)", host, limit)  # fmt: skip
            await trio.aclose_forcefully(stream)
            return
        self._per_ip[host] = self._per_ip.get(host, 0) + 1
        if isinstance(stream, trio.SocketStream):
            set_buffer_sizes(stream.socket, self.state.effective_config)
        conn_id = next(_connection_ids)
        served: trio.abc.Stream = stream
        try:
            principal = ANONYMOUS
            tls = None if self.tls is None else self.tls.context(listener)
            if tls is not None:
                secured = await handshake(stream, tls, host, conn_id)
                if secured is None:
                    return
                served, principal = secured
            await self._serve(served, host, conn_id, listener, principal)
        except ProtocolError as exc:
            log.info("closing connection %d from %s: %s", conn_id, host, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.debug("connection %d from %s went away", conn_id, host)
        finally:
            self._per_ip[host] -= 1
            if not self._per_ip[host]:
                del self._per_ip[host]
            await trio.aclose_forcefully(served)

    async def _serve(
        self,
        stream: trio.abc.Stream,
        host: str,
        conn_id: int,
        listener: str,
        principal: KafkaPrincipal = ANONYMOUS,
    ) -> None:
        """Serve the connection's requests; Produce answers deferred by their handlers are
        sent by tasks of `answers`, in the requests' order. The connection ends once the last
        of them is sent (at once, cancelling them, if the loop failed)."""
        failure: Exception | None = None
        async with trio.open_nursery() as answers:
            try:
                await self._requests(stream, host, conn_id, listener, principal, answers)
            except Exception as exc:  # raised from here, not from the nursery (no group)
                failure = exc
                answers.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _requests(
        self,
        stream: trio.abc.Stream,
        host: str,
        conn_id: int,
        listener: str,
        principal: KafkaPrincipal,
        answers: trio.Nursery,
    ) -> None:
        config = self.state.config
        conn = Connection(max_frame_size=config.socket_request_max_bytes)
        waiting = trio.CancelScope()
        reserved = 0  # of self.memory, for the frame being read; given back once it is answered
        received = time.perf_counter()  # when the last bytes arrived: requests in them queue from then
        deferred: deque[trio.Event] = deque()  # set once each deferred answer is sent, in order
        auth = None if self.sasl is None else self.sasl.authenticator(listener)
        if auth is not None:  # Kafka's bound on what an unauthenticated client may send
            conn.max_frame_size = min(conn.max_frame_size, config.sasl_server_max_receive_size)
        try:
            with waiting:  # cancelled only while it waits for a request (`_reap_idle`)
                while True:
                    event: Any = conn.next_frame() if auth is not None and auth.raw_tokens else conn.next_event()
                    if event is NEED_DATA:
                        if self.stopping:
                            return
                        # only now may the idle reaper or a shutdown cancel `waiting`
                        self._waiting[waiting] = trio.current_time()
                        try:
                            pending = conn.pending_frame_size()
                            if pending is not None and pending > reserved:
                                await self.memory.reserve(pending - reserved)
                                reserved = pending
                            data = await runtime.receive_some(stream, RECEIVE_SIZE)
                        finally:
                            del self._waiting[waiting]
                        if waiting.cancel_called:  # cancelled as the bytes came: closed all the same
                            break
                        conn.receive_data(data)
                        received = time.perf_counter()
                        continue
                    if event is CLOSED:
                        return
                    while deferred and deferred[0].is_set():
                        deferred.popleft()
                    produce = _is_produce(event)
                    if deferred and (not produce or len(deferred) >= MAX_DEFERRED_ANSWERS):
                        # any other request (a SASL re-authentication too, which the
                        # authenticator answers itself) waits for the answers before it
                        await deferred[-1].wait()
                        deferred.clear()
                    if auth is not None:
                        if not await self._authenticate(auth, event, stream, host, conn_id):
                            return
                        if auth.authenticated:
                            assert auth.principal is not None
                            conn.max_frame_size = config.socket_request_max_bytes
                            principal = auth.principal
                        if not isinstance(event, Request | UnsupportedRequest) or not auth.passes:
                            self.memory.release(reserved)
                            reserved = 0
                            if self.loop_time.enabled:
                                self.loop_time.take()  # authentication is charged to no one, as in Kafka
                            continue
                    assert isinstance(event, Request | UnsupportedRequest)
                    throttled: list[int] = []
                    chunks = await self.dispatch(
                        event, host, conn_id, listener, principal, throttled, received, produce
                    )
                    if isinstance(chunks, _Later):
                        sent = trio.Event()
                        previous = deferred[-1] if deferred else None
                        answers.start_soon(self._answer_later, stream, chunks, previous, sent, reserved)
                        deferred.append(sent)
                        reserved = 0  # given back by the answer's task
                        continue
                    if deferred:
                        await deferred[-1].wait()
                        deferred.clear()
                    if chunks is not None:
                        if not has_file_chunks(chunks):
                            if conn.buffered:  # pipelined requests: yield to others between them
                                await stream.send_all(b"".join(chunks))
                            else:  # the receive that follows yields
                                await runtime.send_all(stream, b"".join(chunks))
                        elif isinstance(stream, trio.SocketStream):
                            await send_chunks(stream, chunks)
                            if conn.buffered:  # pipelined requests: yield to others between them
                                await trio.lowlevel.cancel_shielded_checkpoint()
                        else:  # TLS, in-memory: no sendfile; file ranges are read and sent piecewise
                            await send_copied(stream, chunks)
                    self.memory.release(reserved)
                    reserved = 0
                    if throttled:  # over its quota: read nothing more for the throttle time
                        await trio.sleep(throttled[0] / 1000)
            if waiting.cancel_called and not self.stopping:
                log.info("closing idle connection %d from %s", conn_id, host)
        finally:
            self.memory.release(reserved)

    def _refusal(self, key: int, version: int, request: RequestContext) -> Any:
        return _cluster_refusal(self.state, key, version, request)

    async def _authenticate(
        self,
        auth: Authenticator,
        event: Request | UnsupportedRequest | bytes | memoryview,
        stream: trio.abc.Stream,
        host: str,
        conn_id: int,
    ) -> bool:
        """Let the connection's authenticator see `event` (a request, or a raw SASL token after
        SaslHandshake v0) and send what it answers; False when the connection must close.
        Afterwards `auth.passes` says whether the request goes on to its handler."""
        auth.passes = False
        if not isinstance(event, Request | UnsupportedRequest):
            reply = auth.on_raw_token(bytes(event))
            if reply is None:
                log.info("closing connection %d from %s: SASL authentication failed (raw "
                         "tokens after SaslHandshake v0)", conn_id, host)  # fmt: skip
                return False
            await stream.send_all(INT32.pack(len(reply)) + reply)
            return True
        header = event.header
        key, version = header.request_api_key, header.request_api_version
        if isinstance(event, UnsupportedRequest):
            if key == API_VERSIONS_KEY and not auth.authenticated:
                auth.passes = True  # answered at v0 with the supported ranges (KIP-511)
                return True
            verdict = Verdict(Action.CLOSE, reason=f"unsupported API key {key} version {version}")
        else:
            verdict = auth.on_request(key, version, event.body)
        if verdict.action is Action.PASS:
            auth.passes = True
            return True
        if verdict.response is not None:
            await stream.send_all(
                b"".join(encode_response(key, version, header.correlation_id, verdict.response))
            )
        if verdict.action is Action.REPLY:
            if auth.authenticated and auth.reauthentications == 0 and key == SASL_AUTHENTICATE:
                log.debug("connection %d from %s authenticated as %s", conn_id, host, auth.principal)
            return True
        log.info("closing connection %d from %s: %s", conn_id, host, verdict.reason)
        if verdict.delayed:
            await trio.sleep(self.state.config.connection_failed_authentication_delay_ms / 1000)
        return False

    async def dispatch(
        self,
        event: Request | UnsupportedRequest,
        host: str,
        conn_id: int,
        listener: str,
        principal: KafkaPrincipal = ANONYMOUS,
        throttled: list[int] | None = None,
        received: float | None = None,
        deferrable: bool = False,
    ) -> list[Any] | _Later | None:
        """Run the request's handler; return the response chunks, or None for no response.
        With `deferrable` (a Produce on a client connection without quotas), a handler may
        defer its answer: then a `_Later` that `_answer_later` completes.
        A client over a quota (produce or fetch bytes, request time, controller mutations: the
        handler's `request.throttle_ms`) gets the longest throttle in `throttle_time_ms`, and
        the milliseconds are appended to `throttled` (the caller mutes the connection).
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
            key, version, header.correlation_id, header.client_id, host, conn_id, listener,
            principal,
        )  # fmt: skip
        if key == FETCH_KEY and kind == "broker" and self.state.image.client_quotas:
            request.fetch_quota = self._fetch_quota(request)
        response: Any = None
        refused = False
        if self.state.authorizer is not None and key not in EXEMPT_APIS:
            response = self._refusal(key, version, request)
            refused = response is not None
        if deferrable and kind == "broker":
            request.may_defer = not self.state.image.client_quotas
        started = time.perf_counter()
        if not refused:
            response = await self._handle(handler, key, version, event.body, request)
        if isinstance(response, Deferred):
            return _Later(event, kind, request, response, started, received)
        return self._complete(event, kind, request, response, started, received, throttled)

    def _complete(
        self,
        event: Request,
        kind: str,
        request: RequestContext,
        response: Any,
        started: float,
        received: float | None,
        throttled: list[int] | None,
    ) -> list[Any] | None:
        """The handler's response recorded in the metrics, encoded, and throttled by the
        client's quotas."""
        header = event.header
        key, version = header.request_api_key, header.request_api_version
        if self.recording:
            self.state.metrics.record_request(
                key, version, event.body, response,
                (started - received) * 1000 if received is not None else 0.0,
                (time.perf_counter() - (started if received is None else received)) * 1000,
                self._topic_of_id,
            )  # fmt: skip
        chunks = None if response is None else encode_response(key, version, header.correlation_id, response)
        if kind != "broker":
            return chunks  # quotas are clients'; a controller listener's requests are the cluster's
        quotas = self.state.image.client_quotas
        if quotas is not self._quotas_seen:
            self._quotas_seen = quotas
            if has_quota(quotas, REQUEST):
                self.loop_time.enable()
            else:
                self.loop_time.disable()
        if not quotas:
            return chunks
        throttle = max(self._quota_throttle(key, event, request, chunks), request.throttle_ms)
        if throttle > 0:
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle
                chunks = encode_response(key, version, header.correlation_id, response)
            if throttled is not None:
                throttled.append(throttle)
        return chunks

    async def _handle(
        self, handler: Any, key: int, version: int, body: Any, request: RequestContext
    ) -> Any:
        """The handler's response (None: no response), UNKNOWN_SERVER_ERROR when it fails."""
        try:
            if self.faults is None:
                return await handler.handle(self.state, request, body)
            return await self.faults.handle(
                key, version, body, self._topic_of_id,
                lambda body: handler.handle(self.state, request, body),
            )  # fmt: skip
        except ProtocolError:
            raise
        except Exception as exc:
            return _handler_failed(key, version, exc)

    async def _answer_later(
        self,
        stream: trio.abc.Stream,
        later: _Later,
        previous: trio.Event | None,
        sent: trio.Event,
        reserved: int,
    ) -> None:
        """Finish a deferred answer and send it after the answer before it (`previous`). A
        failure closes the connection, so no answer after it goes out of order."""
        request = later.request
        try:
            try:
                response = await later.deferred.finish()
            except ProtocolError:
                raise
            except Exception as exc:
                response = _handler_failed(request.api_key, request.api_version, exc)
            chunks = self._complete(
                later.event, later.kind, request, response, later.started, later.received, None
            )
            if previous is not None:
                await previous.wait()
            if chunks is not None:
                await stream.send_all(b"".join(chunks))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.debug("connection %d went away before a deferred answer", request.connection_id)
            await trio.aclose_forcefully(stream)
        except ProtocolError as exc:
            log.info("closing connection %d from %s: %s", request.connection_id,
                     request.client_host, exc)  # fmt: skip
            await trio.aclose_forcefully(stream)
        except Exception as exc:  # one connection's failure, never the server's
            log.error("closing connection %d from %s: a deferred answer failed (%s): %s: %s",
                      request.connection_id, request.client_host, _raised_at(exc),
                      type(exc).__name__, exc)  # fmt: skip
            await trio.aclose_forcefully(stream)
        finally:
            self.memory.release(reserved)
            sent.set()

    def _fetch_quota(self, request: RequestContext) -> FetchQuota:
        quotas = self.state.image.client_quotas
        user, client = request.principal.name, request.client_id or ""

        def request_time() -> int:
            if not self.loop_time.enabled:
                return 0
            spent = self.loop_time.take()
            return self.state.quotas.record(quotas, REQUEST, user, client, spent * 100)

        return FetchQuota(self.state.quotas, quotas, user, client, request_time)

    def _quota_throttle(
        self, key: int, event: Request, request: RequestContext, chunks: list[Any] | None
    ) -> int:
        """Record the request against its client's quotas (`strom.broker.security.quotas`) and
        return the longest throttle they ask for: produce counts the request's bytes, a
        consumer's fetch the response's, and every request but the cluster's own its event-loop
        time (`strom.broker.network.loop_time`)."""
        quotas = self.state.image.client_quotas
        user, client = request.principal.name, request.client_id or ""
        body = event.body
        exempt = key in CLUSTER_ACTION_KEYS
        throttle = 0
        if key == PRODUCE_KEY:
            throttle = self.state.quotas.record(quotas, PRODUCE, user, client, event.size)
            exempt = getattr(body, "acks", 1) == 0  # Kafka: acks=0 is exempt from request time
        elif key in (FETCH_KEY, OFFSET_FOR_LEADER_EPOCH_KEY):
            follower = max(getattr(body, "replica_id", -1),
                           getattr(getattr(body, "replica_state", None), "replica_id", -1)) >= 0  # fmt: skip
            exempt = follower  # a follower's replication is no client's consumption
            charged = request.fetch_quota is not None and request.fetch_quota.charged
            if key == FETCH_KEY and not follower and chunks is not None and not charged:
                throttle = self.state.quotas.record(
                    quotas, FETCH, user, client, sum(len(c) for c in chunks)
                )
            if charged:  # the handler charged it: the rest of its time counts, unthrottled
                if self.loop_time.enabled:
                    self.state.quotas.record(quotas, REQUEST, user, client, self.loop_time.take() * 100)
                return 0
        if self.loop_time.enabled:
            spent = self.loop_time.take()
            if not exempt:
                throttle = max(throttle, self.state.quotas.record(quotas, REQUEST, user, client, spent * 100))
        return throttle

    def _topic_of_id(self, topic_id: Any) -> str | None:
        topic = self.state.image.topic_by_id(topic_id)
        return None if topic is None else topic.name


MAX_DEFERRED_ANSWERS = 1024
"""Produce answers a connection may owe while it reads on; past it, it waits for them. Their
request bytes stay reserved in `Server.memory` until each is sent. librdkafka sends one
partition per Produce and keeps up to a million in flight, so a producer writing hundreds of
partitions of one leader needs that many: with 1,000 partitions over three nodes
(`bench/scaling.py --cluster`), 64 gave 3,800 msg/s, 256 gave 4,700 and 1,024 gave 7,700."""


@dataclass(slots=True, frozen=True)
class _Later:
    """A request whose handler deferred its answer, with what completing it needs."""

    event: Request
    kind: str
    request: RequestContext
    deferred: Deferred
    started: float
    received: float | None


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Per-host connection limits by address: each host as written, and the addresses a host
    name resolves to (a name that does not resolve limits nothing, and is logged)."""
    limits = dict(overrides)
    for host, count in overrides.items():
        try:
            found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:  # UnicodeError: not a valid name ("a..b")
            log.warning("max.connections.per.ip.overrides: %s does not resolve (%s); it limits "
                        "no connection", host, exc)  # fmt: skip
            continue
        for *_, address in found:
            limits.setdefault(str(address[0]), count)
    return limits


def set_buffer_sizes(sock: trio.socket.SocketType, config: BrokerConfig) -> None:
    """socket.send.buffer.bytes and socket.receive.buffer.bytes on an accepted socket, as
    Kafka's acceptor sets them; -1 leaves the OS's autotuned buffers. A socket that refuses
    (gone already) is served as it is: its first read or write says so."""
    try:
        if config.socket_send_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.socket_send_buffer_bytes)
        if config.socket_receive_buffer_bytes != -1:
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVBUF, config.socket_receive_buffer_bytes
            )
    except OSError as exc:
        log.debug("socket buffer sizes not set: %s", exc)


def _is_produce(event: object) -> bool:
    return isinstance(event, Request) and event.header.request_api_key == PRODUCE_KEY


def _handler_failed(key: int, version: int, exc: Exception) -> Any:
    """A handler raised: UNKNOWN_SERVER_ERROR where the response has an error code (logged
    in one line), else a ProtocolError that closes the connection."""
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
    return response


async def _close_after(stream: trio.abc.Stream, delay: float) -> None:
    """Hold a throttled connection unread for `delay` seconds, then close it (Kafka's acceptor
    closes a connection over its ip's connection creation rate once the throttle is over)."""
    try:
        await trio.sleep(delay)
    finally:
        await trio.aclose_forcefully(stream)


def _cluster_refusal(
    state: BrokerState, key: int, version: int, request: RequestContext
) -> Any:
    """The answer to a request the dispatcher refuses (see `strom.broker.security.authorization`):
    None when it may go on."""
    if key in CLUSTER_CHECKS:
        ok = allowed(state, request, CLUSTER_CHECKS[key], ResourceType.CLUSTER)
    elif key in CHECKED_BY_HANDLER:
        return None
    else:  # an API without its checks: super users only (fail closed)
        ok = is_super_user(state, request)
    if ok:
        return None
    response = error_response(key, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if response is None:
        raise ProtocolError(
            f"{request.principal} may not use API key {key} (no ACL allows it)",
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        )
    return response


def _raised_at(exc: BaseException) -> str:
    """`file:line` where `exc` was raised: enough to find a bug from one log line."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"

