"""One module per API key; this registry is what ApiVersions advertises.

Every module in this package that defines `API_KEY` is registered. Each
handler module defines `API_KEY`, `MIN_VERSION`, `MAX_VERSION` (the
versions Strom implements, which may be fewer than the wire layer decodes)
and `async def handle(broker, request, body)` returning the response body, or
None when no response is sent (Produce with acks=0). `ADVERTISED_MIN_VERSION`
optionally lowers what ApiVersions lists (Produce advertises v0 while refusing
v0-v2, as Kafka 4.0 does so librdkafka keeps compressing, KAFKA-18659).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.request import RequestContext
    from broker.state import BrokerState
    from wire.message import Message

HandleFn = Callable[["BrokerState", "RequestContext", Any], Awaitable["Message | None"]]


@dataclass(frozen=True, slots=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    handle: HandleFn
    advertised_min_version: int
    """What ApiVersions lists; lower than min_version only for Produce (KAFKA-18659)."""

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _handler(module: ModuleType) -> Handler:
    advertised = getattr(module, "ADVERTISED_MIN_VERSION", module.MIN_VERSION)
    return Handler(module.API_KEY, module.MIN_VERSION, module.MAX_VERSION, module.handle, advertised)


def _discover() -> dict[int, Handler]:
    """Every module in this package that defines API_KEY is a handler."""
    found: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "API_KEY"):
            handler = _handler(module)
            if handler.api_key in found:
                raise RuntimeError(f"two handlers for API key {handler.api_key}")
            found[handler.api_key] = handler
    return found


HANDLERS: dict[int, Handler] = _discover()
