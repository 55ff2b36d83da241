"""The forwarder a broker sends admin requests through to the active controller.

`ControllerForwarder` is one `ActiveControllerClient` (`strom.broker.drivers.controller_channel`:
retries with backoff across controller changes) with the forwarding retry window and a check of
the response's type; `controller_forwarder` builds a broker's, once at start-up. Which requests
go there and how each answers when none can is `strom.broker.admin.forwarding`'s.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from strom.broker.drivers.controller_channel import ActiveControllerClient, Changes, Lookup
from strom.broker.drivers.lifecycle import ControllerUnavailable
from strom.broker.security.peer import PeerSecurity
from strom.config import BrokerConfig
from strom.config.quorum import Address
from strom.wire.message import Message

FORWARD_RETRY_TIMEOUT_MS = 60_000
"""How long a forwarded request may retry (Kafka's KRaft broker: its forwarding channel's)."""

R = TypeVar("R", bound=Message)


class ControllerView(Protocol):
    """What a broker knows about the controller quorum (`QuorumController`)."""

    @property
    def is_active(self) -> bool: ...

    @property
    def active_controller_id(self) -> int | None: ...

    def controller_address(self, node_id: int) -> Address | None: ...


def active_controller_lookup(view: ControllerView) -> Lookup:
    """Where the active controller's CONTROLLER listener is, asked afresh on every attempt."""

    def lookup() -> Address | None:
        active = view.active_controller_id
        return None if active is None else view.controller_address(active)

    return lookup


class ControllerForwarder:
    """Sends admin requests to the active controller and returns its responses."""

    def __init__(
        self,
        config: BrokerConfig,
        lookup: Lookup,
        *,
        changes: Changes | None = None,
        retry_timeout_ms: int = FORWARD_RETRY_TIMEOUT_MS,
    ) -> None:
        self._retry_timeout_ms = retry_timeout_ms
        self._client = ActiveControllerClient(
            lookup,
            client_id=f"broker-{config.node_id}-forwarding",
            retry_backoff_ms=config.controller_quorum_retry_backoff_ms,
            # a command may take the controller a while (a topic of thousands of partitions):
            # one retried too early runs twice (TOPIC_ALREADY_EXISTS)
            attempt_timeout_ms=config.controller_socket_timeout_ms,
            changes=changes,
            security=PeerSecurity.to_controllers(config),
        )

    async def forward(
        self, body: Message, version: int, response_type: type[R], timeout_ms: int | None = None
    ) -> R:
        """The active controller's response to `body` at `version`.

        Retries for `timeout_ms` (capped at the forwarding retry timeout; None: that timeout);
        raises ControllerUnavailable when no active controller answered in time.
        """
        window = self._retry_timeout_ms if timeout_ms is None else timeout_ms
        window = min(window, self._retry_timeout_ms)
        response = await self._client.request(body, version, window / 1000)
        if not isinstance(response, response_type):
            raise ControllerUnavailable(
                f"the controller answered {body.NAME} with {type(response).__name__}"
            )
        return response

    async def aclose(self) -> None:
        await self._client.aclose()


def _changes_of(view: object) -> Changes | None:
    """The controller's `next_change()` (QuorumController: an event set at the next Raft or
    metadata change), if it has one: a leader change then ends a retry backoff at once."""
    next_change = getattr(view, "next_change", None)
    return next_change if callable(next_change) else None


def controller_forwarder(config: BrokerConfig, view: ControllerView) -> ControllerForwarder:
    """A broker's forwarder to the active controller that `view` (its controller) knows of."""
    return ControllerForwarder(config, active_controller_lookup(view), changes=_changes_of(view))
