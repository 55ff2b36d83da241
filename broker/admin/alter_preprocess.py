"""The broker's half of AlterConfigs and IncrementalAlterConfigs, before the controller.

Kafka splits these requests: the receiving broker answers some resources
itself (its ConfigAdminManager "preprocessing") and forwards the rest to the
controller, then answers every resource in request order. TOPIC, BROKER,
CLIENT_METRICS and GROUP resources go to the controller, which repeats the
shape checks and owns the durable change (Strom's refuses the last two types).
Answered here, after the same shape checks (a resource named twice, duplicate
keys, null values): BROKER_LOGGER in IncrementalAlterConfigs (log levels, see
`admin_loggers`), and every other resource type: INVALID_REQUEST "Unknown
resource type N" (BROKER_LOGGER included, for the legacy AlterConfigs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from strom.broker.admin import loggers as admin_loggers
from strom.broker.admin.describe_resources import ResourceError
from strom.config.alter_ops import AlterOp
from strom.config.values import ConfigResource
from strom.coordinator.controller.result import ApiError
from strom.wire.errors import ErrorCode

FORWARDED = frozenset(
    {
        ConfigResource.TOPIC,
        ConfigResource.BROKER,
        ConfigResource.CLIENT_METRICS,
        ConfigResource.GROUP,
    }
)


class Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


T = TypeVar("T")


def preprocess(
    resources: Sequence[Resource],
    ops: Sequence[Sequence[tuple[str, int, str | None]]],
    *,
    node_id: int,
    incremental: bool,
    validate_only: bool,
) -> list[ApiError | None]:
    """Per resource: the outcome decided here, or None for a resource the controller decides.

    `ops[i]` lists resource i's (key, operation, value); the legacy API's are all SET (0).
    """
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    outcomes: list[ApiError | None] = []
    for resource, resource_ops in zip(resources, ops, strict=True):
        if resource.resource_type in FORWARDED:
            outcomes.append(None)
            continue
        try:
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise _invalid("Each resource must appear at most once.")
            _check_shape(resource_ops, incremental)
            if not incremental or resource.resource_type != ConfigResource.BROKER_LOGGER:
                raise _invalid(f"Unknown resource type {resource.resource_type}")
            admin_loggers.check_node(resource.resource_name, node_id, describing=False)
            admin_loggers.alter(resource_ops, validate_only)
            outcomes.append(ApiError(ErrorCode.NONE))
        except ResourceError as exc:
            outcomes.append(ApiError(exc.code, exc.message))
    return outcomes


def merge(
    resources: Sequence[Resource],
    local: Sequence[ApiError | None],
    forwarded: Sequence[T],
    make: Callable[[int, str | None, int, str], T],
) -> list[T]:
    """Every resource's outcome in request order: decided here, or the controller's in turn."""
    from_controller = iter(forwarded)
    out: list[T] = []
    for resource, error in zip(resources, local, strict=True):
        if error is None:
            out.append(next(from_controller))
        else:
            out.append(
                make(error.code, error.message, resource.resource_type, resource.resource_name)
            )
    return out


def _check_shape(ops: Sequence[tuple[str, int, str | None]], incremental: bool) -> None:
    names = [name for name, _, _ in ops]
    if len(set(names)) != len(names):
        raise _invalid("Error due to duplicate config keys")
    nulls = [
        name
        for name, op, value in ops
        if value is None and not (incremental and op == AlterOp.DELETE)
    ]
    if nulls:
        raise _invalid("Null value not supported for : " + ", ".join(nulls))


def _invalid(message: str) -> ResourceError:
    return ResourceError(ErrorCode.INVALID_REQUEST, message)
