"""A follower's incremental fetch session on the leader: read only the partitions with news.

A follower fetches every partition it follows from this leader in one session (KIP-227):
its incremental requests name only partitions whose fetch position changed, and the answer
lists only partitions with records, a new high watermark or log start, or an error. Kafka's
leader still reads every partition of the session on every fetch; with thousands of
partitions and one record at a time that is thousands of reads per record. Here the session
keeps one permanent `Watch` on all its partitions (`DataWaiters`), so between two fetches it
collects the partitions that changed, and a fetch reads only:

- the partitions the request names (the follower appended to or truncated them, or just
  added them);
- the partitions the watch saw change: appends, which also wake a parked fetch, and high
  watermark or log start moves, which do not (the new high watermark rides on the next
  answer). A move this session's own read caused is already in its answer and is dropped,
  so each acknowledgement costs the acknowledging follower one read, not two;
- `pending`: partitions that had records left unsent because the response's byte budget
  ran out;
- everything, on the session's first incremental fetch and after a metadata change.

The watch follows the session's membership without walking it: the session notes the
partitions its requests add or forget (`FetchSession.membership`), and each fetch (un)watches
only those, so a fetch costs what changed, not the number of partitions in the session.

Any other partition is quiet: the follower's fetch offset is the log end (it was at the last
read, and nothing was appended since), so reading it would only tell the `ReplicaSet` that
the follower is still caught up. That is what `quiet_since_ms` says instead when the
partition is next read: the follower was caught up at the start of the previous fetch
(`ReplicaSet.follower_fetched`), which keeps Kafka's lastCaughtUpTimeMs for the ISR. Until
then the ISR check asks the session (`FollowerSession.quiet_since`, registered with the
`ReplicationManager`): a follower caught up at its last read was caught up when the
session's latest fetch started, so an append to a long-idle partition does not shrink the
ISR of a follower that kept fetching before its next fetch reads the append.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from strom.broker.data.fetch_read import PartitionRead, Replica, read_partitions, refresh_offsets
from strom.broker.data.fetch_sessions import (
    CachedPartition,
    FetchSession,
    PartitionKey,
    partition_key,
)
from strom.broker.data.waiters import ALL, DataWaiters, Watch
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Set

    from strom.broker.core_state import BrokerCore
    from strom.broker.replication.replication_manager import ReplicationManager
    from strom.coordinator.metadata.image import MetadataImage

Key = tuple[str, int]


@dataclass(eq=False)
class FollowerSession:
    """What the leader keeps beside a follower's `FetchSession`."""

    watch: Watch = field(default_factory=lambda: Watch(replica=True))
    watched: dict[PartitionKey, Key] = field(default_factory=dict)
    """Session partition -> the (topic, partition) registered with `DataWaiters`."""
    by_key: dict[Key, PartitionKey] = field(default_factory=dict)
    unresolved: set[PartitionKey] = field(default_factory=set)
    """Session partitions of a topic id the image does not know (yet): not watched, looked up
    again at every fetch."""
    pending: dict[PartitionKey, None] = field(default_factory=dict)
    """Partitions with records left unsent for want of response bytes, oldest first."""
    fetched_ms: int = -1
    """When the session's latest fetch started (-1: none yet)."""
    replica_id: int = -1
    broker_epoch: int = -1
    """The follower and the broker epoch its latest fetch named."""

    def quiet_since(self, key: Key, replica_id: int, broker_epoch: int | None) -> int:
        """`ReplicationManager`'s ISR check: when the latest fetch started, if `replica_id` in
        `broker_epoch` made it and `key` is watched (a fetch reads every watched partition
        that changed, so one it left unread was quiet when it started); else -1."""
        if (
            replica_id != self.replica_id
            or broker_epoch != self.broker_epoch
            or key not in self.by_key
        ):
            return -1
        return self.fetched_ms

    def forget(self, waiters: DataWaiters) -> None:
        """Stop watching (the session left the cache)."""
        waiters.unwatch(self.watch, self.by_key.keys())
        self.watched.clear()
        self.by_key.clear()
        self.unresolved.clear()


def forget_session(
    waiters: DataWaiters, replication: ReplicationManager, session: FetchSession
) -> None:
    """`FetchSessionCache.on_remove`: a follower's session stops watching its partitions."""
    if isinstance(session.follower, FollowerSession):
        session.follower.forget(waiters)
        replication.follower_sessions.discard(session.follower)


def _follower(
    session: FetchSession, replication: ReplicationManager
) -> tuple[FollowerSession, bool]:
    """The session's follower state, and whether it was just made (the session tracks its
    membership changes from then on, and the ISR check sees its fetches)."""
    if isinstance(session.follower, FollowerSession):
        return session.follower, False
    follower = session.follower = FollowerSession()
    session.membership = {}
    replication.follower_sessions.add(follower)
    return follower, True


def _sync_watch(
    waiters: DataWaiters,
    image: MetadataImage,
    session: FetchSession,
    follower: FollowerSession,
    new: bool,
) -> None:
    """Watch every partition of the session and nothing else: all of them when the follower
    state is `new`, then only the partitions the requests added or forgot since (the session's
    `membership`) and those whose topic id was unknown."""
    if new:
        keys: Iterable[PartitionKey] = list(session.partitions)
    else:
        membership = session.membership
        assert membership is not None  # tracked since the follower state was made
        if not membership and not follower.unresolved:
            return
        keys = [*membership, *follower.unresolved]
    if session.membership:
        session.membership = {}
    for key in keys:
        part = session.partitions.get(key)
        if part is None:
            _unwatch(waiters, follower, key)
        elif key not in follower.watched:
            _watch(waiters, image, session, follower, key, part)


def _watch(
    waiters: DataWaiters,
    image: MetadataImage,
    session: FetchSession,
    follower: FollowerSession,
    key: PartitionKey,
    part: CachedPartition,
) -> None:
    topic_name = part.topic
    if session.uses_topic_ids:
        topic = image.topic_by_id(part.topic_id)
        topic_name = None if topic is None else topic.name
    if topic_name is None:  # read (and refused) whenever the request names it
        follower.unresolved.add(key)
        return
    follower.unresolved.discard(key)
    watched = (topic_name, part.partition)
    follower.watched[key] = watched
    follower.by_key[watched] = key
    waiters.watch(follower.watch, [watched])


def _unwatch(waiters: DataWaiters, follower: FollowerSession, key: PartitionKey) -> None:
    follower.unresolved.discard(key)
    follower.pending.pop(key, None)
    name = follower.watched.pop(key, None)
    if name is None:
        return
    if follower.by_key.get(name) == key:  # else another key (a topic id since) watches it
        del follower.by_key[name]
        waiters.unwatch(follower.watch, [name])


def _selected(
    session: FetchSession,
    follower: FollowerSession,
    wanted: list[CachedPartition],
    changed: Set[Key],
) -> list[CachedPartition]:
    """The session's partitions to read: pending, then named by the request, then changed."""
    keys: dict[PartitionKey, None] = dict.fromkeys(follower.pending)
    uses_ids = session.uses_topic_ids
    for part in wanted:
        keys[partition_key(part, uses_ids)] = None
    for name in changed:
        key = follower.by_key.get(name)
        if key is not None:
            keys[key] = None
    parts = session.partitions
    return [parts[k] for k in keys if k in parts]


async def read_follower_session(
    broker: BrokerCore,
    replication: ReplicationManager,
    waiters: DataWaiters,
    session: FetchSession,
    wanted: list[CachedPartition],
    replica: Replica,
    max_bytes: int,
    max_wait_ms: int,
    ready: Callable[[list[PartitionRead]], bool],
    authorized: Callable[[str], bool] | None = None,
) -> list[PartitionRead]:
    """An incremental fetch of a follower's session: read the partitions with news (module
    docstring); if `ready` says that is not enough, park on the session's watch until an
    append or `max_wait_ms`, reading what changed."""
    follower, new = _follower(session, replication)
    _sync_watch(waiters, broker.image, session, follower, new)
    started = broker.clock()
    changed = follower.watch.take()
    previous, follower.fetched_ms = follower.fetched_ms, started
    follower.replica_id, follower.broker_epoch = replica.replica_id, replica.broker_epoch
    everything = new or changed is ALL or previous < 0
    parts = list(session.partitions.values()) if everything else _selected(
        session, follower, wanted, changed
    )  # fmt: skip
    # the partitions not read now were quiet when the previous fetch started
    quiet = Replica(replica.replica_id, replica.broker_epoch, max(previous, 0))
    reads = _read(broker, replication, session, parts, max_bytes, quiet, authorized)
    if max_wait_ms > 0 and not ready(reads):
        deadline = trio.current_time() + max_wait_ms / 1000
        # ... and those first read below were quiet when this fetch started
        quiet = Replica(replica.replica_id, replica.broker_epoch, started)
        while True:
            changed = frozenset()
            with trio.move_on_at(deadline):
                changed = await follower.watch.wait()
            if changed is ALL:
                reads = _read(
                    broker, replication, session, list(session.partitions.values()), max_bytes,
                    quiet, authorized,
                )  # fmt: skip
            elif changed:
                parts = _selected(session, follower, [], changed)
                again = {partition_key(p, session.uses_topic_ids) for p in parts}
                reads = [
                    r for r in reads if partition_key(r.part, session.uses_topic_ids) not in again
                ]
                used = sum(r.size for r in reads)
                reads += _read(
                    broker, replication, session, parts, max(0, max_bytes - used), quiet,
                    authorized, min_one=used == 0,
                )  # fmt: skip
            if trio.current_time() >= deadline or ready(reads):
                break
        refresh_offsets(reads)  # the high watermark as it is now rides on the answer
    _forget_answered_moves(follower, reads)
    _note_pending(session, follower, reads)
    return reads


def _forget_answered_moves(follower: FollowerSession, reads: list[PartitionRead]) -> None:
    """Drop the high watermark moves noted for partitions this answer carries as they are now.

    A follower's read of a partition records its fetch offset, which may move the high
    watermark; the watch notes that move for every session on the partition, this one too.
    This answer already carries the new high watermark (it is taken after the record, and a
    parked fetch's answer is refreshed), so the note would only make the next fetch read the
    partition again and leave it out of the answer (nothing changed since). Only marks are
    dropped: a set event means an append or a metadata change was noted, and then nothing is.
    """
    watch = follower.watch
    if not watch.keys or watch.event.is_set() or watch.everything:
        return
    for read in reads:
        if read.error == ErrorCode.NONE and read.diverging is None and read.topic is not None:
            watch.keys.discard((read.topic, read.part.partition))


def _read(
    broker: BrokerCore,
    replication: ReplicationManager,
    session: FetchSession,
    parts: list[CachedPartition],
    max_bytes: int,
    replica: Replica,
    authorized: Callable[[str], bool] | None,
    *,
    min_one: bool = True,
) -> list[PartitionRead]:
    if not parts:
        return []
    return read_partitions(
        broker, replication, broker.image, parts, session.uses_topic_ids, max_bytes, 0, replica,
        authorized, min_one=min_one,
    )  # fmt: skip


def _note_pending(
    session: FetchSession, follower: FollowerSession, reads: list[PartitionRead]
) -> None:
    """Partitions read without error that got no records although the log holds some past
    the fetch offset (the response's bytes ran out) are read again at the next fetch."""
    for read in reads:
        key = partition_key(read.part, session.uses_topic_ids)
        log = read.log
        if (
            read.size == 0
            and read.diverging is None
            and log is not None
            and read.error == ErrorCode.NONE
            and log.log_end_offset > read.part.fetch_offset
        ):
            follower.pending[key] = None
        else:
            follower.pending.pop(key, None)
