"""The controller mutation quota (KIP-599) of CreateTopics, CreatePartitions and DeleteTopics.

Each topic's partitions created or deleted count against the client's
`controller_mutation_rate` (`strom.broker.security.quotas`), topic by topic in request order,
before the request reaches the controller: from CreateTopics v6, CreatePartitions v3 and
DeleteTopics v5 on, a topic met with an empty bucket answers THROTTLING_QUOTA_EXCEEDED and the
response's `throttle_time_ms` says how long until the bucket holds tokens again; older versions
are never refused, only throttled. Kafka's controller counts a topic only once it passed its
checks: a topic that will fail them for a reason the broker can see (an invalid or repeated
name, an existing topic on creation, an unknown one on deletion, no increase) is neither
counted nor refused, and topics the controller then fails anyway give their partitions back;
a `validate_only` request counts, as in Kafka.

Kafka's KRaft controller keeps the buckets, so they are cluster-wide; Strom's brokers keep them
for the requests they receive (KIP-599's original per-broker enforcement): a client that
spreads its admin requests over N brokers gets up to N times its rate. A request forwarded to
the controller was charged by the broker that received it, so a controller listener charges
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from strom.broker.security.quotas import MutationQuota

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

T = TypeVar("T")
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
"""Kafka's message for THROTTLING_QUOTA_EXCEEDED."""


def admit(
    broker: BrokerState,
    request: RequestContext,
    strict_since: int,
    entries: Iterable[T],
    permits: Callable[[T], int],
) -> tuple[list[T], list[T], MutationQuota | None]:
    """Split `entries` into those the quota admits and those it refuses (strict versions
    only); `permits(entry)` is 0 for an entry that fails before the quota counts. The quota
    is None when none applies to this client."""
    entries = list(entries)
    if request.listener in broker.config.controller_listeners:
        return entries, [], None
    quota = broker.quotas.mutation(
        broker.image.client_quotas, request.principal.name, request.client_id or "",
        strict=request.api_version >= strict_since,
    )  # fmt: skip
    if quota is None:
        return entries, [], None
    admitted: list[T] = []
    refused: list[T] = []
    for entry in entries:
        count = permits(entry)  # 0: it fails before Kafka's controller would count it
        (admitted if count == 0 or quota.admit(count) else refused).append(entry)
    return admitted, refused, quota


def settle(quota: MutationQuota | None, request: RequestContext, failed: int) -> None:
    """After the controller answered: give back the failed mutations' partitions and put the
    quota's throttle on the request (the dispatcher mutes the connection for it)."""
    if quota is None:
        return
    quota.settle(failed)
    request.throttle_ms = max(request.throttle_ms, quota.throttle_ms)
