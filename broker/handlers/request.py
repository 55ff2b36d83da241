"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass

from strom.broker.security.principal import ANONYMOUS, KafkaPrincipal


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
