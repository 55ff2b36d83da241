"""An outbound connection to another node: one request at a time, answered in order.

The production client a node uses to talk to its peers (the Raft driver to the other voters).
It connects on first use and after any failure; every failure (refused, reset, timed out,
malformed) closes the connection and is raised as `PeerUnavailable`, so the caller decides
whether and when to retry. A caller cancelled from outside mid-request closes it too: the
answer it leaves behind must not reach the next caller. Requests carry the caller's
correlation id. Concurrent callers (several admin requests forwarded to the controller at
once) take turns: a lock keeps one request on the wire at a time, and only the time on the
wire counts against `timeout_s`.

It lives beside the drivers that use it, not in `strom.broker.network`: the server there
imports the handlers, which import the drivers.
"""

from __future__ import annotations

import ssl

import trio

from strom.broker import runtime
from strom.broker.security.peer import PeerSecurity
from strom.broker.security.sasl_client import SaslLoginError, login
from strom.config.quorum import Address
from strom.wire.connection import ClientConnection, Closed, NeedData
from strom.wire.errors import ProtocolError
from strom.wire.message import Message

RECEIVE_SIZE = 256 * 1024


class PeerUnavailable(Exception):
    """The request got no response (the connection is closed; connect again to retry)."""


class PeerConnection:
    """A lazily opened connection to `address`."""

    def __init__(
        self, address: Address, client_id: str, security: PeerSecurity | None = None
    ) -> None:
        self.address = address
        self._security = security
        """TLS and SASL to the peer's listener (None: plaintext)."""
        self._client_id = client_id
        self._stream: trio.abc.Stream | None = None
        self._conn = ClientConnection(client_id)
        self._lock = trio.Lock()
        self._reauthenticate_at: float | None = None
        """When the SASL session must be renewed (KIP-368): the connection is opened again."""

    async def request(
        self, body: Message, version: int, correlation_id: int, timeout_s: float
    ) -> Message:
        """Send `body` at `version` and return the response; PeerUnavailable on any failure."""
        lock = self._lock
        try:  # the usual case, one caller (a replica fetcher): no schedule point for the lock
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            return await self._request(body, version, correlation_id, timeout_s)
        except BaseException:
            # Cancelled from outside (or anything `_request` lets through) with the request
            # perhaps on the wire: its answer would come to the next caller, so the
            # connection goes (a shielded close is immediate: no close_notify is waited for).
            if self._stream is not None:
                with trio.CancelScope(shield=True):
                    await self.aclose()
            raise
        finally:
            lock.release()

    async def _request(
        self, body: Message, version: int, correlation_id: int, timeout_s: float
    ) -> Message:
        try:
            # trio.fail_after, without its generator context manager (a replica fetcher pays
            # this on every round)
            with trio.CancelScope(deadline=trio.current_time() + timeout_s) as deadline:
                if self._reauthenticate_at is not None and trio.current_time() >= self._reauthenticate_at:
                    await self.aclose()
                if self._stream is None:
                    self._stream = await self._open()
                    self._conn = ClientConnection(self._client_id)
                    await self._login(correlation_id)
                return await self._exchange(body, version, correlation_id)
            assert deadline.cancelled_caught
            raise trio.TooSlowError
        except SaslLoginError as exc:
            await self.aclose()
            raise PeerUnavailable(f"{self.address} refused the authentication: {exc}") from exc
        except PeerUnavailable:
            await self.aclose()
            raise
        except (
            OSError,
            trio.TooSlowError,
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            ProtocolError,
            ssl.SSLError,
        ) as exc:
            await self.aclose()
            raise PeerUnavailable(f"{self.address}: {exc or type(exc).__name__}") from exc

    async def _exchange(self, body: Message, version: int, correlation_id: int) -> Message:
        stream = self._stream
        assert stream is not None
        # no schedule point for the send: the receive below yields (or waits)
        await runtime.send_all(stream, self._conn.send_request(body, version, correlation_id=correlation_id))
        while True:
            event = self._conn.next_response()
            if isinstance(event, Closed):
                raise PeerUnavailable(f"{self.address} closed the connection")
            if isinstance(event, NeedData):
                data = await runtime.receive_some(stream, RECEIVE_SIZE)
                if not data:
                    raise PeerUnavailable(f"{self.address} closed the connection")
                self._conn.receive_data(data)
                continue
            if event[0] != correlation_id:  # never another request's answer as this one's
                raise ProtocolError(f"expected correlation id {correlation_id}, got {event[0]}")
            return event[1]

    async def _login(self, correlation_id: int) -> None:
        """SASL on a fresh connection, when the peer's listener asks for it."""
        self._reauthenticate_at = None
        if self._security is None or self._security.sasl is None:
            return

        async def send(body: Message, version: int) -> Message:
            return await self._exchange(body, version, correlation_id)

        lifetime_ms = await login(send, self._security.sasl())
        if lifetime_ms > 0:  # renew well before the session ends (Kafka's clients: 85-95%)
            self._reauthenticate_at = trio.current_time() + lifetime_ms * 0.85 / 1000

    async def _open(self) -> trio.abc.Stream:
        tcp = await runtime.current().network.connect(*self.address)
        context = None if self._security is None else self._security.ssl_context
        if context is None:
            return tcp
        stream = trio.SSLStream(tcp, context, server_hostname=self.address[0])
        try:
            await stream.do_handshake()
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return stream

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await trio.aclose_forcefully(stream)
