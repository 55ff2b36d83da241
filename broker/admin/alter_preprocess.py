"""The broker's half of AlterConfigs and IncrementalAlterConfigs, before the controller.

Kafka splits these requests: the receiving broker answers some resources
itself (its ConfigAdminManager "preprocessing") and forwards the rest to the
controller, then answers every resource in request order. TOPIC, BROKER,
CLIENT_METRICS and GROUP resources go to the controller, which repeats the
shape checks and owns the durable change (Strom's refuses CLIENT_METRICS).
Answered here, after the same shape checks (a resource named twice, duplicate
keys, null values): BROKER_LOGGER in IncrementalAlterConfigs (log levels, see
`admin_loggers`), and every other resource type: INVALID_REQUEST "Unknown
resource type N" (BROKER_LOGGER included, for the legacy AlterConfigs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from strom.broker.admin import loggers as admin_loggers
from strom.broker.admin.describe_resources import ResourceError
from strom.broker.security.authorization import Asker, Authorizing, allowed
from strom.broker.security.listeners import validate as validate_tls
from strom.config.alter_ops import AlterOp
from strom.config.config_error import ConfigError
from strom.config.dynamic import overlay
from strom.config.values import ConfigResource
from strom.coordinator.controller.result import ApiError
from strom.coordinator.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.security.listeners import ListenerTls
    from strom.config import BrokerConfig
    from strom.coordinator.metadata.image import MetadataImage


class TlsOwner(Protocol):
    """What a key store change is vetted against (`BrokerState`)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def tls(self) -> ListenerTls | None: ...

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
Ops = Sequence[tuple[str, int, str | None]]
OwnBrokerCheck = Callable[[Ops, bool], str | None]
"""(the resource's (key, operation, value)s, incremental) -> why it is refused, or None."""


_CONFIG_RESOURCES = {
    ConfigResource.TOPIC: (ResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ConfigResource.BROKER: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ConfigResource.BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ConfigResource.CLIENT_METRICS: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ConfigResource.GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}


def config_refusal(
    state: Authorizing,
    request: Asker,
    operation: AclOperation,
    resource_type: int,
    resource_name: str,
) -> ApiError | None:
    """The error for a config resource the principal may not `operation` (DESCRIBE_CONFIGS,
    ALTER_CONFIGS), as Kafka maps it: a topic's on the topic, broker and logger configs on the
    cluster, a group's on the group; None when allowed (or the type is unknown: refused later)."""
    found = _CONFIG_RESOURCES.get(resource_type)  # type: ignore[call-overload]
    if found is None:
        return None
    acl_type, error = found
    name = resource_name if acl_type != ResourceType.CLUSTER else CLUSTER_NAME
    if allowed(state, request, operation, acl_type, name):
        return None
    return ApiError(error, None)


def tls_change_refusal(state: TlsOwner, ops: Ops, incremental: bool) -> str | None:
    """Why a change of this broker's configs would leave a TLS listener unusable, or None.

    Kafka's broker validates a dynamic key store before it is stored (DynamicBrokerConfig):
    the new files are loaded here; a certificate of another subject needs ssl.allow.dn.changes.
    """
    if not any(_tls_key(key) for key, _, _ in ops):
        return None
    layers = state.image.broker_config_layers(state.config)
    new = {} if not incremental else dict(layers.per_broker)
    for key, op, value in ops:
        if op == AlterOp.DELETE or value is None:
            new.pop(key, None)
        elif op == AlterOp.SET:
            new[key] = value
        else:
            return None  # APPEND/SUBTRACT: the controller answers them
    try:
        config = overlay(layers.static, {**layers.cluster_default, **new})
    except ConfigError:
        return None  # the controller answers with the reason
    return validate_tls(config, state.tls)


def _tls_key(key: str) -> bool:
    return key.startswith("ssl.") or (key.startswith("listener.name.") and ".ssl." in key)


def preprocess(
    resources: Sequence[Resource],
    ops: Sequence[Sequence[tuple[str, int, str | None]]],
    *,
    node_id: int,
    incremental: bool,
    validate_only: bool,
    check_own_broker: OwnBrokerCheck | None = None,
    authorize: Callable[[int, str], ApiError | None] | None = None,
) -> list[ApiError | None]:
    """Per resource: the outcome decided here, or None for a resource the controller decides.

    `ops[i]` lists resource i's (key, operation, value); the legacy API's are all SET (0).
    `check_own_broker` vets a change of this broker's own resource that only this broker can
    (a key store it must be able to load): a reason refuses it with INVALID_REQUEST.
    `authorize` refuses a resource the principal may not ALTER_CONFIGS (`config_refusal`).
    """
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    outcomes: list[ApiError | None] = []
    for resource, resource_ops in zip(resources, ops, strict=True):
        refused = None if authorize is None else authorize(resource.resource_type, resource.resource_name)
        if refused is not None:
            outcomes.append(refused)
            continue
        if resource.resource_type in FORWARDED:
            reason = None
            if (
                check_own_broker is not None
                and resource.resource_type == ConfigResource.BROKER
                and resource.resource_name == str(node_id)
            ):
                reason = check_own_broker(resource_ops, incremental)
            outcomes.append(None if reason is None else ApiError(ErrorCode.INVALID_REQUEST, reason))
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
