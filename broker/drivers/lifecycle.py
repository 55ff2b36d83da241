"""`BrokerLifecycle`: this broker's registration with the controller, and its heartbeats.

Kafka's BrokerLifecycleManager, broker side: register a new incarnation (BrokerRegistration,
API 62), heartbeat (BrokerHeartbeat, API 63) until the controller unfences the broker, then
every `broker.heartbeat.interval.ms` to keep its lease; a heartbeat answered
STALE_BROKER_EPOCH (the controller lost or replaced the registration) registers again.
`controlled_shutdown` heartbeats `want_shut_down` until the controller answers
`should_shut_down`.

It talks to the controller through `ControllerChannel`: `QuorumChannel`
(`quorum_controller.py`) answers in process while this node is the active controller (always,
on a single node), and otherwise through `RemoteControllerChannel` (`controller_channel.py`),
which sends the same messages to the active controller's CONTROLLER listener and retries while
it moves. A channel
that gives up raises `ControllerUnavailable`: registration keeps trying until
initial.broker.registration.timeout.ms (the error then names the last cause), a periodic
heartbeat logs it and tries again at the next interval. That timeout bounds registration
only, as in Kafka: a registered broker stays fenced for as long as its metadata takes to catch
up.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from strom.broker import runtime
from strom.config import BrokerConfig, Listener
from strom.wire.errors import ErrorCode
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)

log = logging.getLogger("strom.lifecycle")


_TRANSIENT_REFUSALS = frozenset(
    {
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    }
)
"""Registration answers that say "not now" rather than "never": retried with backoff until
initial.broker.registration.timeout.ms (a refusal such as INCONSISTENT_CLUSTER_ID is final)."""


UNFENCE_PROGRESS_S = 10.0
"""A registered broker waiting to be unfenced says so this often."""


class RegistrationError(Exception):
    """The controller refused this broker's registration; the message says why."""


class ControllerUnavailable(Exception):
    """No active controller answered a request in time; the message says what was tried last."""


class ControllerChannel(Protocol):
    """How this broker reaches the active controller.

    A channel retries by itself while the controller moves or is unreachable, for as long as a
    request may take; then it raises ControllerUnavailable, which this module reports.
    """

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse: ...

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse: ...


class BrokerLifecycle:
    """Registration and heartbeats of one broker (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        channel: ControllerChannel,
        *,
        registration: Callable[[Sequence[Listener], uuid.UUID], BrokerRegistrationRequest],
        metadata_offset: Callable[[], int],
        incarnation_id: uuid.UUID | None = None,
    ) -> None:
        self._config = config
        self._channel = channel
        self._registration = registration
        self._metadata_offset = metadata_offset
        self.incarnation_id = incarnation_id or runtime.new_uuid()
        """This process's incarnation: a restart is a new one (Kafka's incarnation id)."""
        self.broker_epoch = -1
        """The epoch of the current registration (-1: not registered)."""
        self.previous_broker_epoch = -1
        """The epoch the previous process's clean-shutdown markers named (-1: none, or an
        unclean shutdown), sent as PreviousBrokerEpoch (KIP-966)."""
        self.endpoints: list[Listener] = []
        self.fenced = True
        self._registered_with: list[tuple[str, str, int]] | None = None

    @property
    def node_id(self) -> int:
        return self._config.node_id

    async def register(self, endpoints: Sequence[Listener]) -> int:
        """Register (unless already registered with exactly these endpoints), then heartbeat
        until the controller unfences this broker; returns the broker epoch.

        Raises RegistrationError when the controller refuses, or when no registration is
        accepted within initial.broker.registration.timeout.ms. Once registered, the broker
        stays fenced, heartbeating, for as long as its metadata takes to catch up (a large
        image loads for seconds), as Kafka's broker waits for the controller to find it caught
        up with no limit (its server.max.startup.time.ms is unlimited by default); it logs
        its progress every UNFENCE_PROGRESS_S.
        """
        wanted = [(e.name, e.host, e.port) for e in endpoints]
        if self.broker_epoch >= 0 and self._registered_with == wanted and not self.fenced:
            return self.broker_epoch
        await self._register_within_timeout(list(endpoints))
        backoff = self._config.controller_quorum_retry_backoff_ms / 1000
        report_at = trio.current_time() + UNFENCE_PROGRESS_S
        while self.fenced:
            try:
                response = await self.heartbeat()
            except ControllerUnavailable as exc:
                log.warning("broker %d: %s", self.node_id, exc)
                await trio.sleep(backoff)
                continue
            if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
                await self._register_within_timeout(list(endpoints))
            elif self.fenced:
                if trio.current_time() >= report_at:
                    report_at = trio.current_time() + UNFENCE_PROGRESS_S
                    log.info(
                        "broker %d: registered (epoch %d), fenced until its metadata catches "
                        "up (at offset %d)", self.node_id, self.broker_epoch,
                        self._metadata_offset(),
                    )  # fmt: skip
                await trio.sleep(backoff)
        return self.broker_epoch

    async def _register_within_timeout(self, endpoints: list[Listener]) -> None:
        """Register a new incarnation, retrying an unreachable controller until
        initial.broker.registration.timeout.ms (RegistrationError then, naming the last
        cause)."""
        timeout = self._config.initial_broker_registration_timeout_ms / 1000
        backoff = self._config.controller_quorum_retry_backoff_ms / 1000
        unreachable: ControllerUnavailable | None = None
        with trio.move_on_after(timeout):
            while True:
                try:
                    await self._register(endpoints)
                    return
                except ControllerUnavailable as exc:
                    unreachable = exc
                    log.warning("broker %d: %s", self.node_id, exc)
                    await trio.sleep(backoff)
        last = f" (last: {unreachable})" if unreachable is not None else ""
        raise RegistrationError(
            f"broker {self.node_id} was not registered within "
            "initial.broker.registration.timeout.ms="
            f"{self._config.initial_broker_registration_timeout_ms}; check that the "
            f"controller quorum is reachable{last}"
        )

    async def _register(self, endpoints: list[Listener]) -> None:
        request = self._registration(endpoints, self.incarnation_id)
        request.previous_broker_epoch = self.previous_broker_epoch
        while True:
            response = await self._channel.register(request)
            if response.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION:
                log.info(
                    "broker %d: another incarnation is registered and still heartbeating; "
                    "retrying",
                    self.node_id,
                )
                # a restart is accepted once the old incarnation missed its heartbeats: ask often
                await trio.sleep(min(self._config.broker_heartbeat_interval_ms / 1000, 0.25))
            elif response.error_code in _TRANSIENT_REFUSALS:
                # the controller could not act now (e.g. its metadata log failed a write):
                # Kafka's brokers retry any such answer within the registration timeout
                log.warning(
                    "broker %d: the controller could not register it now (%s); retrying",
                    self.node_id, ErrorCode(response.error_code).name,
                )  # fmt: skip
                await trio.sleep(self._config.controller_quorum_retry_backoff_ms / 1000)
            else:
                break
        if response.error_code != ErrorCode.NONE:
            raise RegistrationError(
                f"the controller refused to register broker {self.node_id}: "
                f"{ErrorCode(response.error_code).name}"
            )
        self.broker_epoch = response.broker_epoch
        self.endpoints = endpoints
        self._registered_with = [(e.name, e.host, e.port) for e in endpoints]
        self.fenced = True
        log.debug("broker %d registered with epoch %d", self.node_id, self.broker_epoch)

    async def heartbeat(
        self, *, want_shut_down: bool = False, want_fence: bool = False
    ) -> BrokerHeartbeatResponse:
        """One heartbeat with this broker's metadata offset; records whether it is fenced."""
        request = BrokerHeartbeatRequest(
            broker_id=self.node_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self._metadata_offset(),
            want_fence=want_fence,
            want_shut_down=want_shut_down,
        )
        response = await self._channel.heartbeat(request)
        if response.error_code == ErrorCode.NONE:
            self.fenced = response.is_fenced
        return response

    async def run(self) -> None:
        """Heartbeat every broker.heartbeat.interval.ms; register again if the controller
        no longer knows this registration."""
        interval = self._config.broker_heartbeat_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            try:
                response = await self.heartbeat()
            except ControllerUnavailable as exc:
                log.warning("broker %d heartbeat failed: %s", self.node_id, exc)
                continue
            code = ErrorCode(response.error_code)
            if code == ErrorCode.STALE_BROKER_EPOCH:
                log.warning("broker %d: registration %d is stale; registering again",
                            self.node_id, self.broker_epoch)  # fmt: skip
                # the controller holds a newer registration (a repeated request of this
                # incarnation, delivered late, makes one): that one is fenced, so this is too,
                # and `register` must not take the old one for current
                self.fenced = True
                await self.register(self.endpoints)
            elif code != ErrorCode.NONE:
                log.warning("broker %d heartbeat failed: %s", self.node_id, code.name)
            elif self.fenced:
                log.warning("broker %d is fenced; asking to be unfenced", self.node_id)

    async def controlled_shutdown(self) -> bool:
        """Ask to shut down and wait until the controller says it is safe (leadership moved).
        True once approved; False when abandoned (no controller, or an error answer)."""
        backoff = self._config.controller_quorum_retry_backoff_ms / 1000
        while True:
            try:
                response = await self.heartbeat(want_shut_down=True)
            except ControllerUnavailable as exc:
                log.warning("broker %d: controlled shutdown abandoned: %s", self.node_id, exc)
                return False
            if response.error_code != ErrorCode.NONE:
                log.warning("broker %d: controlled shutdown abandoned: %s", self.node_id,
                            ErrorCode(response.error_code).name)  # fmt: skip
                return False
            if response.should_shut_down:
                return True
            await trio.sleep(backoff)
