"""Incremental fetch sessions (KIP-227), with Kafka's FetchSessionCache semantics.

A consumer's first fetch (session id 0, epoch 0) is "full": it names every
partition, and the broker answers with a new session id (0 when the cache has
no room). Later fetches carry that id and the next epoch, name only partitions
whose fetch position changed (plus `forgotten_topics_data` to drop some), and
get back only partitions with news: records, a changed high watermark or log
start offset, or an error. Epoch -1 means sessionless (closing the given
session); an unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
INVALID_FETCH_SESSION_EPOCH, a v13+ request on a name-based session (or the
reverse) FETCH_SESSION_TOPIC_ID_ERROR.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions.
A new session may take the slot of one idle for over two minutes, else of the
least valuable evictable one (fewer partitions, unprivileged; a consumer's
session becomes evictable by other consumers after two minutes, a follower's
by followers at once), exactly Kafka's rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from strom.broker import runtime
from strom.wire.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000
INT32_MAX = 2**31 - 1

PartitionKey = tuple[str | uuid.UUID, int]
"""(topic name, partition) for v<13 sessions; (topic id, partition) for v13+."""


@dataclass
class CachedPartition:
    """A partition's fetch parameters, and what the session last told the client about it."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1
    follower_log_start: int = -1
    """A follower's fetch: its own log start offset (the request's log_start_offset)."""

    def update_request(self, other: CachedPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.follower_log_start = other.follower_log_start
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.last_fetched_epoch = other.last_fetched_epoch

    def must_respond(
        self, error: int, hw: int, log_start: int, has_records: bool, diverging: bool
    ) -> bool:
        """Whether an incremental response must include this partition; remembers what it sent."""
        respond = has_records or diverging
        if hw != self.high_watermark:
            respond = True
            self.high_watermark = hw
        if log_start != self.log_start_offset:
            respond = True
            self.log_start_offset = log_start
        if error != ErrorCode.NONE:
            self.high_watermark = -1  # resend once the error clears
            respond = True
        return respond


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    follower: object | None = None
    """A follower's session: what the leader keeps to read only the partitions with news
    (`strom.broker.data.follower_sessions.FollowerSession`); None for consumers."""
    membership: dict[PartitionKey, None] | None = None
    """Partitions added or dropped since the follower's state last looked (it drains this,
    so a fetch costs what changed, not the session's size); None: not tracked (consumers)."""

    def update(self, wanted: list[CachedPartition], forgotten: list[PartitionKey]) -> None:
        """Add or update the named partitions, then drop the forgotten ones."""
        membership = self.membership
        for part in wanted:
            key = partition_key(part, self.uses_topic_ids)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = part
                if membership is not None:
                    membership[key] = None
            else:
                cached.update_request(part)
        for key in forgotten:
            if self.partitions.pop(key, None) is not None and membership is not None:
                membership[key] = None

    def move_to_end(self, key: PartitionKey) -> None:
        """Kafka rotates partitions that got data to the end, so the next fetch starts elsewhere."""
        part = self.partitions.pop(key, None)
        if part is not None:
            self.partitions[key] = part


def partition_key(part: CachedPartition, uses_topic_ids: bool) -> PartitionKey:
    if uses_topic_ids:
        return (part.topic_id, part.partition)
    return (part.topic or "", part.partition)


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


class FetchSessionCache:
    """The bounded cache of sessions; see the module docstring for the eviction rules."""

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = runtime.new_random()
        self.on_remove: Callable[[FetchSession], None] | None = None
        """Told of every session that leaves the cache (closed, replaced or evicted)."""

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None and self.on_remove is not None:
            self.on_remove(session)
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms

    def maybe_create(
        self,
        now_ms: int,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: dict[PartitionKey, CachedPartition],
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(
            privileged, len(partitions), now_ms
        ):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        self.sessions[session_id] = FetchSession(
            session_id,
            privileged,
            uses_topic_ids,
            now_ms,
            now_ms,
            next_epoch(INITIAL_EPOCH),
            partitions,
        )
        return session_id

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, INT32_MAX)
            if candidate not in self.sessions:
                return candidate

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest.id)
            return True
        candidates = [s for s in self.sessions.values() if self._evictable(s, privileged, now_ms)]
        if not candidates:
            return False
        cheapest = min(candidates, key=_value)
        if (privileged, size) < (cheapest.privileged, len(cheapest.partitions)):
            return False
        self.remove(cheapest.id)
        return True

    def _evictable(self, session: FetchSession, by_privileged: bool, now_ms: int) -> bool:
        old = now_ms - session.created_ms > self.eviction_ms
        if by_privileged:
            return not session.privileged or old
        return old


def _value(session: FetchSession) -> tuple[bool, int, int]:
    """Kafka's EvictableKey order: unprivileged before privileged, smaller before larger."""
    return (session.privileged, len(session.partitions), session.id)


@dataclass
class FetchContext:
    """How one Fetch request relates to the session cache.

    kind: "error" (answer `error` with no partitions), "sessionless", "full"
    (create a session after reading) or "incremental" (`session` is set and
    its epoch already advanced; `partitions` is empty: the session's are in `session`, and a
    follower's fetch reads only some of them).
    """

    kind: str
    partitions: list[CachedPartition]
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    expected_epoch: int = 0
    created: int = INVALID_SESSION_ID
    """The id of the session a full fetch created (INVALID_SESSION_ID: none)."""


def new_context(
    cache: FetchSessionCache,
    version: int,
    session_id: int,
    epoch: int,
    wanted: list[CachedPartition],
    forgotten: list[PartitionKey],
    now_ms: int,
) -> FetchContext:
    """Kafka's FetchManager.newContext."""
    uses_ids = version >= 13
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        unique = list({partition_key(p, uses_ids): p for p in wanted}.values())
        return FetchContext("sessionless" if epoch == FINAL_EPOCH else "full", unique)
    session = cache.get(session_id)
    if session is None:
        return FetchContext("error", [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext("error", [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_ids:
        return FetchContext("error", [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(wanted, forgotten)
    if not session.partitions:
        cache.remove(session.id)
        return FetchContext("sessionless", wanted)
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    return FetchContext("incremental", [], session=session, expected_epoch=session.epoch)
