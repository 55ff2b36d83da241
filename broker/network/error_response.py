"""The answer to a request whose handler failed: UNKNOWN_SERVER_ERROR, or a closed connection.

Kafka answers a request whose handling threw with the request's own error
response (`AbstractRequest.getErrorResponse`), so the client sees
UNKNOWN_SERVER_ERROR and keeps its connection; only a request with no error
response closes the connection. Strom builds that response generically for every
response that carries a top-level `error_code` at the request's version (Fetch v7+,
Metadata v13+, the group APIs, InitProducerId, ...). APIs whose errors live only
per topic or partition (Produce, CreateTopics, ...) close the connection, which
clients treat as a retriable network error.
"""

from __future__ import annotations

from functools import cache

from strom.wire.apis import response_class
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message


@cache
def _has_top_level_error(api_key: int, version: int) -> bool:
    """Whether this response version carries a top-level error_code (a round trip keeps it)."""
    cls = response_class(api_key)
    if "error_code" not in cls.FIELDS:
        return False
    probe = cls(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)  # type: ignore[call-arg]
    try:
        decoded = cls.decode(probe.encode(version), version)
    except ProtocolError:
        return False
    return bool(getattr(decoded, "error_code", None) == ErrorCode.UNKNOWN_SERVER_ERROR)


def error_response(api_key: int, version: int, error: ErrorCode) -> Message | None:
    """A response reporting `error` for the whole request, or None when this version has none."""
    if not _has_top_level_error(api_key, version):
        return None
    return response_class(api_key)(error_code=error)  # type: ignore[call-arg]
