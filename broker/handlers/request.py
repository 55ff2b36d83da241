"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass


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
