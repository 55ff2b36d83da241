"""`metrics.listener`: Prometheus metrics and health checks over HTTP, on the broker's trio loop.

    GET /metrics   Prometheus text format (OpenMetrics when the scraper asks for it)
    GET /healthz   liveness: 200 while the event loop answers
    GET /readyz    readiness: 200 when ready, else 503; a JSON body lists the checks
                   (`health.readiness`)

HTTP is parsed by h11 (sans-IO, like `strom.wire`); the exposition is prometheus_client's,
over a registry holding only this broker's collector (`families.BrokerCollector`). Both are
imported only when the listener is on. Serving on the trio loop, not in prometheus_client's
own server thread, lets the collector read the broker's state without locks. Requests are
small and answered one per connection at a time; a connection idle for 30 s is closed; at
most 64 connections are served at once (more wait in the backlog).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import h11
import trio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from strom.broker.monitoring.families import BrokerCollector
from strom.broker.monitoring.health import readiness

if TYPE_CHECKING:
    from strom.broker.network.server import Server
    from strom.broker.state import BrokerState

log = logging.getLogger("strom.metrics")

IDLE_SECONDS = 30.0
MAX_CONNECTIONS = 64
MAX_REQUEST_BYTES = 16 * 1024


class MetricsEndpoint:
    """The HTTP side of `metrics.listener` for one broker."""

    def __init__(self, state: BrokerState, server: Server | None = None) -> None:
        self.state = state
        self.server = server
        self.serving = False
        """The broker serves its client listeners (set by the broker process)."""
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(state, server))
        self._slots = trio.Semaphore(MAX_CONNECTIONS)

    async def serve(self, listeners: list[trio.SocketListener]) -> None:
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept, listener, nursery)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        async with listener:
            while True:
                await self._slots.acquire()
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    self._slots.release()
                    log.warning("metrics listener: accept failed (%s)", exc)
                    await trio.sleep(0.1)
                    continue
                nursery.start_soon(self._connection, stream)

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            await self._serve(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass
        finally:
            self._slots.release()
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                with trio.move_on_after(IDLE_SECONDS) as idle:
                    data = await stream.receive_some(MAX_REQUEST_BYTES)
                if idle.cancelled_caught:
                    return
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                status, content_type, body = self.answer(
                    event.method.decode("ascii", "replace"),
                    event.target.decode("ascii", "replace"),
                    dict(event.headers).get(b"accept", b"").decode("latin-1"),
                )
                headers = [
                    ("Content-Type", content_type),
                    ("Content-Length", str(len(body))),
                ]
                await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)))
                await stream.send_all(conn.send(h11.Data(data=body)))
                await stream.send_all(conn.send(h11.EndOfMessage()))
                continue
            if isinstance(event, h11.ConnectionClosed) or conn.our_state is h11.MUST_CLOSE:
                return
            if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()

    def answer(self, method: str, target: str, accept: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request."""
        path = target.split("?", 1)[0]
        if method != "GET":
            return 405, "text/plain; charset=utf-8", b"only GET\n"
        if path == "/metrics":
            encoder, content_type = choose_encoder(accept)
            return 200, content_type, encoder(self.registry)
        if path in ("/healthz", "/livez"):
            return 200, "text/plain; charset=utf-8", b"ok\n"
        if path == "/readyz":
            result = readiness(self.state, self.serving)
            body = {"ready": result.ready, "checks": result.checks}
            if result.reason:
                body["reason"] = result.reason
            text = json.dumps(body, sort_keys=True).encode() + b"\n"
            return (200 if result.ready else 503), "application/json", text
        return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /healthz or /readyz\n"


async def open_metrics_listener(host: str, port: int) -> list[trio.SocketListener]:
    """Bind `metrics.listener` (an empty host: every interface)."""
    return await trio.open_tcp_listeners(port, host=host or None)
