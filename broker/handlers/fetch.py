"""Fetch (key 1).

Behavior:
- Partitions are read in order (session order for incremental fetches) within
  max_bytes (capped by `fetch.max.bytes`) and each partition_max_bytes; the
  first non-empty partition may exceed both by its first batch (KIP-74).
  Records are exactly the stored batches, never recompressed; a topic whose
  batches may be zstd answers UNSUPPORTED_COMPRESSION_TYPE to v4-v9, as Kafka does.
- Long polling: when fewer than min_bytes are ready and nothing failed, the
  fetch parks (broker.data_waiters) until an append, a log-start move or a
  metadata change on a fetched partition, re-reads, and answers once min_bytes
  are there or max_wait_ms has passed. A parked fetch holds only its own
  connection.
- Per partition: unknown topic id (v13+) UNKNOWN_TOPIC_ID, unknown topic or
  partition UNKNOWN_TOPIC_OR_PARTITION (both listed after the readable
  partitions, as Kafka does), current_leader_epoch FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH, fetch offset outside [log start, log end]
  OFFSET_OUT_OF_RANGE, disk errors KAFKA_STORAGE_ERROR (NOT_LEADER_OR_FOLLOWER
  for v4-v5). Errors carry high watermark, last stable and log start -1.
- Consumers read up to the high watermark (read_uncommitted) or the last
  stable offset (read_committed: below it every transaction is decided);
  aborted_transactions is null for read_uncommitted, and for read_committed
  lists the aborted transactions (producer id, first offset) overlapping the
  batches returned, [] when none (broker.data.fetch_read); partitions refused
  before any read (unknown topic, partition or topic id) carry [], as Kafka's do.
- KIP-392 (v11+): a follower replica serves consumers too, up to its own high watermark; a
  leader with `replica.selector.class` set to the rack-aware selector may answer a partition
  with `preferred_read_replica` (an in-sync follower on the request's rack_id) and no records
  (broker.replication.read_replica, docs/replication.md). Below v11 only leaders serve.
- v12+ last_fetched_epoch: a log that diverged answers diverging_epoch.
- On a controller listener, Fetch is Raft's: a replica of `__cluster_metadata` reads the
  quorum leader's log through this node's Raft driver (`raft_rpc`), v13+ only (it needs the
  last fetched epoch and the diverging epoch and snapshot id).
- Client quotas (broker.security.quotas): a consumer reads at most its byte quota's window;
  a fetch over its byte rate or request time is answered with no partitions and
  throttle_time_ms (its bytes not counted, a full fetch creating no session), as Kafka does.
- Fetch sessions (v7+, KIP-227): see broker.fetch_sessions. Incremental
  responses list only partitions with records, a new high watermark or log
  start offset, or an error.

Version notes: v4 baseline (isolation level, last stable offset, aborted
transactions); v5 log start offset; v7 sessions; v9 current leader epoch;
v11 rack id, preferred read replica; v12 flexible, last fetched epoch,
diverging epoch; v13 topic ids; v15 replica state; v16 current leader and node endpoints
(KIP-951: with NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH); v17 directory ids.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import trio

from strom.broker.admin.broker_nodes import current_leader
from strom.broker.data.fetch_read import (
    Consumer,
    PartitionRead,
    Replica,
    load_records,
    read_partitions,
    refresh_offsets,
    reread_changed,
    topic_responses,
)
from strom.broker.data.fetch_sessions import (
    INVALID_SESSION_ID,
    CachedPartition,
    FetchContext,
    PartitionKey,
    new_context,
    partition_key,
)
from strom.broker.data.follower_sessions import read_follower_session
from strom.broker.data.waiters import ALL
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 17

REDIRECT_VERSION = 16
"""KIP-951's current_leader and node_endpoints."""
_REDIRECTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)

FIRST_TOPIC_ID_VERSION = 13
FOLLOWER_READ_VERSION = 11
"""KIP-392: consumers' Fetch v11+ carries rack_id and may be served by a follower."""


async def handle(broker: BrokerState, request: RequestContext, body: FetchRequest) -> FetchResponse:
    if request.listener in broker.config.controller_listeners:
        return await _raft_fetch(broker, request, body)
    version = request.api_version
    uses_ids = version >= FIRST_TOPIC_ID_VERSION
    cache = broker.fetch_sessions
    wanted = _wanted(body, uses_ids)
    context = new_context(
        cache,
        version,
        body.session_id,
        body.session_epoch,
        wanted,
        _forgotten(body, uses_ids),
        broker.clock(),
    )
    if context.kind == "error":
        return FetchResponse(error_code=context.error, session_id=INVALID_SESSION_ID)
    replica = _fetcher(request, body)
    quota = None if isinstance(replica, Replica) else request.fetch_quota
    max_bytes = max(0, min(body.max_bytes, broker.config.fetch_max_bytes))
    window_bytes = None if quota is None else quota.max_bytes()
    if window_bytes is not None:
        max_bytes = min(max_bytes, window_bytes)
    min_bytes = min(body.min_bytes, max_bytes)
    authorized = _authorized_topics(broker, request, isinstance(replica, Replica))
    if isinstance(replica, Replica) and context.session is not None:
        reads = await read_follower_session(
            broker, broker.replication, broker.waiters, context.session,
            wanted, replica, max_bytes, body.max_wait_ms,
            # nothing to read is no reason to answer at once here: it is the quiet session
            lambda reads: bool(reads) and _ready(reads, min_bytes), authorized,
        )  # fmt: skip
    else:
        reads = await _read_until_ready(
            broker, body, context, uses_ids, max_bytes, min_bytes, replica, authorized
        )
    reads = [r for r in reads if r.readable] + [r for r in reads if not r.readable]
    if quota is not None:
        throttle = quota.charge(sum(r.size for r in reads if r.readable))
        if throttle > 0:
            request.throttle_ms = throttle
            return _throttled(context)
    response = _respond(broker, body, context, reads, uses_ids)
    if isinstance(response, FetchResponse):
        return response
    await load_records(response)
    topics = topic_responses(response, version, body.isolation_level)
    return FetchResponse(
        error_code=ErrorCode.NONE,
        session_id=_session_id(context),
        responses=topics,
        node_endpoints=_redirects(broker, request, topics) if version >= REDIRECT_VERSION else [],
    )


def _redirects(
    broker: BrokerState, request: RequestContext, topics: list[FetchResponse.FetchableTopicResponse]
) -> list[FetchResponse.NodeEndpoint]:
    """KIP-951: a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH partition names its current
    leader, and the response carries the leaders' endpoints on the request's listener."""
    image = broker.image
    endpoints: dict[int, FetchResponse.NodeEndpoint] = {}
    for topic in topics:
        redirected = [p for p in topic.partitions if p.error_code in _REDIRECTED]
        if not redirected:  # the usual answer: no lookups
            continue
        found = image.topic_by_id(topic.topic_id) if not topic.topic else None
        name = topic.topic or (found.name if found is not None else "")
        for p in redirected:
            leader, epoch, node = current_leader(
                broker, image, name, p.partition_index, request.listener
            )
            p.current_leader = FetchResponse.LeaderIdAndEpoch(leader, epoch)
            if node is not None:
                endpoints[node.broker_id] = FetchResponse.NodeEndpoint(*node[:4])
    return [endpoints[i] for i in sorted(endpoints)]


def _wanted(body: FetchRequest, uses_ids: bool) -> list[CachedPartition]:
    return [
        CachedPartition(
            topic=None if uses_ids else topic.topic,
            topic_id=topic.topic_id if uses_ids else ZERO_UUID,
            partition=p.partition,
            fetch_offset=p.fetch_offset,
            max_bytes=p.partition_max_bytes,
            current_leader_epoch=p.current_leader_epoch,
            last_fetched_epoch=p.last_fetched_epoch,
            follower_log_start=p.log_start_offset,
        )
        for topic in body.topics
        for p in topic.partitions
    ]


def _forgotten(body: FetchRequest, uses_ids: bool) -> list[PartitionKey]:
    return [
        (f.topic_id if uses_ids else f.topic, index)
        for f in body.forgotten_topics_data
        for index in f.partitions
    ]


def _fetcher(request: RequestContext, body: FetchRequest) -> Replica | Consumer | None:
    """Who fetches: a follower replica, a v11+ consumer (KIP-392), or an older consumer."""
    replica_id = _replica_id(body)
    if replica_id >= 0:
        return Replica(replica_id, body.replica_state.replica_epoch)
    if request.api_version >= FOLLOWER_READ_VERSION:
        return Consumer(body.rack_id, request.listener)
    return None


async def _read_until_ready(
    broker: BrokerState,
    body: FetchRequest,
    context: FetchContext,
    uses_ids: bool,
    max_bytes: int,
    min_bytes: int,
    replica: Replica | Consumer | None,
    authorized: Callable[[str], bool] | None,
) -> list[PartitionRead]:
    """Read now; if Kafka would delay this fetch, park until it has enough or times out."""

    session = context.session
    parts = context.partitions if session is None else list(session.partitions.values())

    def read() -> list[PartitionRead]:
        return read_partitions(
            broker,
            broker.replication,
            broker.image,
            parts,
            uses_ids,
            max_bytes,
            body.isolation_level,
            replica,
            authorized,
        )

    reads = read()
    if body.max_wait_ms <= 0 or _ready(reads, min_bytes):
        return reads
    deadline = trio.current_time() + body.max_wait_ms / 1000
    keys = [(r.topic, r.part.partition) for r in reads if r.topic is not None]
    with broker.waiters.watching(keys, replica=isinstance(replica, Replica)) as watch:
        while True:
            changed: frozenset[tuple[str, int]] | set[tuple[str, int]] = ALL
            with trio.move_on_at(deadline):
                changed = await watch.wait()
            if changed is ALL:  # a metadata change, or the deadline: read everything again
                reads = read()
            else:  # only the partitions that changed (a parked fetch of many partitions)
                reads = reread_changed(
                    broker, broker.replication, broker.image, reads, changed, uses_ids,
                    max_bytes, body.isolation_level, replica, authorized,
                )  # fmt: skip
            if trio.current_time() >= deadline or _ready(reads, min_bytes):
                if isinstance(replica, Replica) and changed is not ALL:
                    refresh_offsets(reads)  # the high watermark rides on this answer
                return reads


def _ready(reads: list[PartitionRead], min_bytes: int) -> bool:
    """Kafka answers at once with no readable partition, enough bytes, an error, a divergence
    or a preferred read replica (KIP-392: the consumer should go elsewhere)."""
    readable = [r for r in reads if r.readable]
    if not readable:
        return True
    if any(
        r.error != ErrorCode.NONE or r.diverging is not None or r.preferred_read_replica >= 0
        for r in readable
    ):
        return True
    return sum(r.size for r in readable) >= min_bytes


def _respond(
    broker: BrokerState,
    body: FetchRequest,
    context: FetchContext,
    reads: list[PartitionRead],
    uses_ids: bool,
) -> list[PartitionRead] | FetchResponse:
    """The partitions to answer, updating the session; or a whole-request error."""
    if context.kind == "full":
        for r in reads:
            r.part.high_watermark = -1 if r.error else r.high_watermark
            r.part.log_start_offset = -1 if r.error else r.log_start_offset
        context.created = broker.fetch_sessions.maybe_create(
            broker.clock(),
            _replica_id(body) >= 0,
            uses_ids,
            {partition_key(r.part, uses_ids): r.part for r in reads},
        )
    elif context.kind == "incremental":
        session = context.session
        assert session is not None
        if session.epoch != context.expected_epoch:
            return FetchResponse(
                error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=session.id
            )
        kept = []
        for r in reads:
            error = r.error
            hw = -1 if error else r.high_watermark
            start = -1 if error else r.log_start_offset
            redirected = r.diverging is not None or r.preferred_read_replica >= 0
            if r.part.must_respond(error, hw, start, r.size > 0, redirected):
                kept.append(r)
                session.move_to_end(partition_key(r.part, uses_ids))
        reads = kept
    return reads


def _throttled(context: FetchContext) -> FetchResponse:
    """A fetch over its client's quota: no partitions, the session left as the request made it
    (its epoch is spent; a full fetch creates none), as Kafka's getThrottledResponse answers."""
    session = context.session
    if session is None:
        return FetchResponse(error_code=ErrorCode.NONE, session_id=INVALID_SESSION_ID)
    if session.epoch != context.expected_epoch:
        return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=session.id)
    return FetchResponse(error_code=ErrorCode.NONE, session_id=session.id)


def _session_id(context: FetchContext) -> int:
    if context.session is not None:
        return context.session.id
    return context.created


def _replica_id(body: FetchRequest) -> int:
    """The fetching replica (v15+ in replica_state; either way -1 for consumers)."""
    return max(body.replica_id, body.replica_state.replica_id)


RAFT_MIN_VERSION = 13


def _authorized_topics(
    broker: BrokerState, request: RequestContext, from_follower: bool
) -> Callable[[str], bool] | None:
    """Which topics this fetch may read (None: all): a follower needs CLUSTER_ACTION on the
    cluster (else every partition TOPIC_AUTHORIZATION_FAILED, as Kafka answers), a consumer READ
    on each topic."""
    if broker.authorizer is None:
        return None
    if from_follower:
        ok = allowed(broker, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
        return None if ok else (lambda _topic: False)
    return partial(allowed, broker, request, AclOperation.READ, ResourceType.TOPIC)


async def _raft_fetch(
    broker: BrokerState, request: RequestContext, body: FetchRequest
) -> FetchResponse:
    from strom.broker.handlers.raft_rpc import answer

    if not allowed(broker, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return FetchResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    if request.api_version < RAFT_MIN_VERSION:
        raise ProtocolError(
            f"Fetch v{request.api_version} on a controller listener: the metadata quorum needs "
            f"v{RAFT_MIN_VERSION}+ (client {request.client_id!r})",
            ErrorCode.UNSUPPORTED_VERSION,
        )
    response = await answer(broker, request, body)
    assert isinstance(response, FetchResponse)
    return response
