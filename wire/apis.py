"""Look up the generated request and response classes of an API key.

Modules are imported on first use, so a process pays only for the APIs it
actually speaks (the broker starts faster; a client imports a handful).
"""

from __future__ import annotations

import importlib
from functools import cache

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message
from strom.wire.messages import APIS, ApiInfo

API_VERSIONS = 18


def api_info(api_key: int) -> ApiInfo:
    info = APIS.get(api_key)
    if info is None:
        raise ProtocolError(f"unknown API key {api_key}", ErrorCode.INVALID_REQUEST)
    return info


@cache
def _classes(api_key: int) -> tuple[type[Message], type[Message]]:
    info = api_info(api_key)
    module = importlib.import_module(info.module)
    request: type[Message] = getattr(module, info.request)
    response: type[Message] = getattr(module, info.response)
    return request, response


def request_class(api_key: int) -> type[Message]:
    return _classes(api_key)[0]


def response_class(api_key: int) -> type[Message]:
    return _classes(api_key)[1]


def is_supported(api_key: int, api_version: int) -> bool:
    info = APIS.get(api_key)
    return info is not None and info.min_version <= api_version <= info.max_version


def request_header_version(api_key: int, api_version: int) -> int:
    """Header v2 for flexible request versions, v1 otherwise.

    Versions past the newest one known are taken as flexible when the API has
    flexible versions, so the correlation id of a too-new ApiVersions request
    can still be read and answered (KIP-511).
    """
    info = APIS.get(api_key)
    if info is not None and info.flexible_min is not None and api_version >= info.flexible_min:
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Header v1 for flexible versions, v0 otherwise; ApiVersions always v0 (KIP-511)."""
    if api_key == API_VERSIONS:
        return 0
    info = APIS.get(api_key)
    if info is not None and info.flexible_min is not None and api_version >= info.flexible_min:
        return 1
    return 0
