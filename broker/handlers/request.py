"""What a handler knows about the request it is answering."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from strom.broker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from strom.broker.security.quotas import FetchQuota


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    listener: str
    """The name of the listener the request arrived on (Metadata answers with its endpoints)."""
    principal: KafkaPrincipal = ANONYMOUS
    """Who sent it: `User:ANONYMOUS` on PLAINTEXT, the mapped certificate name on SSL."""
    throttle_ms: int = 0
    """Set by a handler whose client went over its controller mutation quota: the dispatcher
    puts the longest of this and the other quotas' throttles in the response and mutes the
    connection for it (`strom.broker.security.quotas`)."""
    may_defer: bool = False
    """Set by the connection loop on a Produce it may answer later: the handler may then
    return a `Deferred` once its records are appended, and the connection reads and appends
    the next Produce while this one waits for its replicas (`strom.broker.network.server`)."""
    fetch_quota: FetchQuota | None = None
    """Set by the dispatcher on a client's Fetch while client quotas exist: the fetch handler
    charges its answer before building it and answers a throttled fetch without records."""


@dataclass(slots=True, frozen=True)
class Deferred:
    """A handler's answer that is not ready yet: `finish()` waits for what the answer waits
    for (an acks=all Produce: its replicas) and returns the response. Returned only for a
    request whose `may_defer` was set, and only after the work that must happen in the
    order of the connection's requests (the appends) is done."""

    finish: Callable[[], Awaitable[Any]]
