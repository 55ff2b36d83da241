"""Requests to the ACTIVE controller over the network, and the broker's channel built on them.

A broker that is not itself the active controller reaches it on a CONTROLLER listener, as
Kafka's NodeToControllerChannelManager does: it asks where the active controller is now
(`lookup`, from the quorum's view of the leader), sends the request there, and on any sign
that it asked the wrong node or none answered - the connection failed (`PeerUnavailable`),
the response carries NOT_CONTROLLER (error 41) anywhere, or no controller is known - it
backs off and asks again, until the request's own deadline. Then it
raises `ControllerUnavailable` with one line naming the last cause.

The backoff starts at `controller.quorum.retry.backoff.ms` and doubles up to
`RETRY_BACKOFF_MAX_MS` (Kafka's `retry.backoff.max.ms` default). A `changes` callable, if
given, returns an event that the NEXT change of the active controller sets (a fresh event per
call, or one replaced at every change; never one already set). It is taken before the lookup,
so a change between the lookup and the wait is not missed, and a change cuts the backoff
short: a new leader is tried as soon as it is known.

A request may have reached the controller even when its response did not (the connection
broke after sending); a retry then meets the outcome of the first attempt (the topic already
exists), as in Kafka; a registration of the same incarnation simply registers it again.

`RemoteControllerChannel` is the `ControllerChannel` of `BrokerLifecycle` for a broker whose
controller runs elsewhere: BrokerRegistration (API 62) at v4 and BrokerHeartbeat (API 63) at
v1, the latest versions of the generated classes, which Kafka 4.x brokers send to a Kafka 4.x
controller (Strom's controller listener serves exactly these ranges). Each request may retry
for `broker.session.timeout.ms / 2`, the window Kafka gives its heartbeat channel (KAFKA-14392):
a heartbeat that cannot get through by then is reported while the lease may still be saved.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator

import trio

from strom.broker.drivers.lifecycle import ControllerUnavailable
from strom.broker.drivers.peer import PeerConnection, PeerUnavailable
from strom.broker.security.peer import PeerSecurity
from strom.config import BrokerConfig
from strom.config.quorum import Address
from strom.wire.errors import ErrorCode
from strom.wire.message import Message, Struct
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)

log = logging.getLogger("strom.controller_channel")

RETRY_BACKOFF_MAX_MS = 1000
"""The longest pause between two attempts (Kafka's retry.backoff.max.ms default)."""
REGISTRATION_VERSION = BrokerRegistrationRequest.MAX_VERSION
HEARTBEAT_VERSION = BrokerHeartbeatRequest.MAX_VERSION

Lookup = Callable[[], Address | None]
"""Where the active controller's CONTROLLER listener is now (None: no controller is known)."""
Changes = Callable[[], trio.Event]
"""An event that is set at the next change of the active controller."""


def error_codes(message: Struct) -> Iterator[int]:
    """Every `error_code` in a message, nested results included (Kafka's errorCounts)."""
    for name in message.FIELDS:
        value = getattr(message, name)
        if name == "error_code" and isinstance(value, int):
            yield value
        elif isinstance(value, Struct):
            yield from error_codes(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Struct):
                    yield from error_codes(item)


def is_not_controller(response: Message) -> bool:
    return any(code == ErrorCode.NOT_CONTROLLER for code in error_codes(response))


class ActiveControllerClient:
    """Requests to whichever controller is active, retried across controller changes."""

    def __init__(
        self,
        lookup: Lookup,
        *,
        client_id: str,
        retry_backoff_ms: int,
        attempt_timeout_ms: int,
        changes: Changes | None = None,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS,
        security: PeerSecurity | None = None,
    ) -> None:
        self._lookup = lookup
        self._security = security
        self._changes = changes
        self._client_id = client_id
        self._backoff_s = retry_backoff_ms / 1000
        self._backoff_max_s = max(retry_backoff_max_ms, retry_backoff_ms) / 1000
        self._attempt_timeout_s = attempt_timeout_ms / 1000
        self._connections: dict[Address, PeerConnection] = {}
        self._correlation = itertools.count(1)

    async def request(self, body: Message, version: int, timeout_s: float) -> Message:
        """Send `body` at `version` to the active controller and return its response.

        Retries (see the module docstring) for up to `timeout_s`; at least one attempt is made
        even when `timeout_s <= 0`. Raises ControllerUnavailable when the time is up.
        """
        deadline = trio.current_time() + max(timeout_s, 0.0)
        backoff = self._backoff_s
        # the first attempt is made even when the deadline has passed (timeout_s <= 0)
        attempt = (
            self._attempt_timeout_s if timeout_s <= 0 else min(self._attempt_timeout_s, timeout_s)
        )
        while True:
            changed = self._changes() if self._changes is not None else None
            address = self._lookup()
            if address is None:
                cause = "no active controller is known"
            else:
                try:
                    response = await self._connect(address).request(
                        body, version, next(self._correlation), attempt
                    )
                except PeerUnavailable as exc:
                    cause = str(exc)
                else:
                    if not is_not_controller(response):
                        return response
                    cause = f"{address} answered NOT_CONTROLLER"
            remaining = deadline - trio.current_time()
            if remaining > 0:
                log.debug("%s: %s; retrying in %.3fs", body.NAME, cause, backoff)
                with trio.move_on_after(min(backoff, remaining)):
                    if changed is None:
                        await trio.sleep_forever()
                    else:
                        await changed.wait()
                backoff = min(backoff * 2, self._backoff_max_s)
                remaining = deadline - trio.current_time()
            if remaining <= 0:
                raise ControllerUnavailable(
                    f"{body.NAME} got no answer from an active controller within "
                    f"{timeout_s * 1000:.0f} ms; last: {cause}"
                )
            attempt = min(self._attempt_timeout_s, remaining)

    def _connect(self, address: Address) -> PeerConnection:
        """One connection per controller address, kept across leader changes (a quorum has
        few voters, and the leader often comes back); closed by `aclose`."""
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = PeerConnection(
                address, self._client_id, self._security
            )
        return connection

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.aclose()


class RemoteControllerChannel:
    """`ControllerChannel` over the network to the active controller (module docstring).

    `timeout_s` is how long one register or heartbeat may retry; `for_broker` takes it and the
    backoff and per-attempt timeout from the broker's configuration.
    """

    def __init__(
        self,
        lookup: Lookup,
        *,
        client_id: str,
        timeout_s: float,
        changes: Changes | None = None,
        retry_backoff_ms: int = 20,
        attempt_timeout_ms: int = 2000,
        security: PeerSecurity | None = None,
    ) -> None:
        self._timeout_s = timeout_s
        self._client = ActiveControllerClient(
            lookup,
            client_id=client_id,
            retry_backoff_ms=retry_backoff_ms,
            attempt_timeout_ms=attempt_timeout_ms,
            changes=changes,
            security=security,
        )

    @classmethod
    def for_broker(
        cls,
        config: BrokerConfig,
        lookup: Lookup,
        *,
        changes: Changes | None = None,
        timeout_ms: int | None = None,
    ) -> RemoteControllerChannel:
        """Broker `config.node_id`'s channel: retries for broker.session.timeout.ms / 2 (or
        `timeout_ms`), backing off from controller.quorum.retry.backoff.ms, each attempt
        waiting up to controller.quorum.request.timeout.ms."""
        window = timeout_ms if timeout_ms is not None else config.broker_session_timeout_ms // 2
        return cls(
            lookup,
            client_id=f"broker-{config.node_id}-heartbeat",
            timeout_s=window / 1000,
            changes=changes,
            retry_backoff_ms=config.controller_quorum_retry_backoff_ms,
            attempt_timeout_ms=config.controller_quorum_request_timeout_ms,
            security=PeerSecurity.to_controllers(config),
        )

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        response = await self._client.request(request, REGISTRATION_VERSION, self._timeout_s)
        assert isinstance(response, BrokerRegistrationResponse)
        return response

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        response = await self._client.request(request, HEARTBEAT_VERSION, self._timeout_s)
        assert isinstance(response, BrokerHeartbeatResponse)
        return response

    async def aclose(self) -> None:
        await self._client.aclose()
