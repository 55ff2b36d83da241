"""Wake-ups for long-polling fetches when partition data changes.

A Fetch that has not gathered `min_bytes` parks on the partitions it reads
(Kafka's fetch purgatory). A produce with acks=all parks here too until the high watermark
passes its records (Kafka's produce purgatory), and a DeleteRecords until the low watermark
reaches its offsets (`settle` runs both). Each parked request owns one `Watch`, so waking is
O(waiters of that partition), a parked fetch never holds up any other connection, and a woken
one learns which of its partitions changed (it re-reads only those).

Who is woken by what (Kafka's DelayedFetch completes a follower's fetch on new data and a
consumer's on a new high watermark):

- `changed`: every watch of the partition. A single-replica partition's append (its high
  watermark moves with it), DeleteRecords' new log start, transaction markers.
- `appended`: the leader of a replicated partition appended: only replica watches (a follower
  reads up to the log end). Its consumers and acks=all produces wait for the high watermark.
- `high_watermark_moved`: the leader's `ReplicationManager` moved a partition's high watermark
  or learnt a follower's log start (the low watermark DeleteRecords waits on): every watch
  but replica ones. A follower learns the new high watermark from its next fetch response.
- `wake_all`: a metadata change (a partition may have gone away or changed leader).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import trio

Key = tuple[str, int]
T = TypeVar("T")


ALL: frozenset[Key] = frozenset()
"""What `Watch.wait` returns after `wake_all`: every watched partition may have changed."""


class Watch:
    """One parked request: `wait()` returns the partitions that changed since the last wait
    (`ALL` after a metadata change)."""

    __slots__ = ("event", "everything", "keys", "replica")

    def __init__(self, replica: bool = False) -> None:
        self.event = trio.Event()
        self.keys: set[Key] = set()
        self.everything = False
        self.replica = replica
        """A follower's fetch: woken by appends, not by high watermark moves."""

    def wake(self, key: Key | None = None) -> None:
        if key is None:
            self.everything = True
        else:
            self.keys.add(key)
        self.event.set()

    def mark(self, key: Key) -> None:
        """Note a change without waking the waiter (a follower's session: the next fetch
        reads it)."""
        self.keys.add(key)

    async def wait(self) -> frozenset[Key] | set[Key]:
        await self.event.wait()
        return self.take()

    def take(self) -> frozenset[Key] | set[Key]:
        """The changes noted since the last `wait` or `take` (ALL after `wake_all`); resets."""
        if self.event.is_set():
            self.event = trio.Event()
        keys, self.keys = self.keys, set()
        if self.everything:
            self.everything = False
            return ALL
        return keys


class DataWaiters:
    """Per-partition sets of parked requests' watches."""

    def __init__(self) -> None:
        self._waiting: dict[Key, set[Watch]] = {}

    def changed(self, topic: str, partition: int) -> None:
        """Wake every request parked on this partition."""
        key = (topic, partition)
        for watch in self._waiting.get(key, ()):
            watch.wake(key)

    def appended(self, topic: str, partition: int) -> None:
        """A replicated partition's leader appended: wake the followers' fetches parked on it."""
        key = (topic, partition)
        for watch in self._waiting.get(key, ()):
            if watch.replica:
                watch.wake(key)

    def high_watermark_moved(self, topic: str, partition: int) -> None:
        """A led partition's high watermark (or low watermark) moved: wake everything parked on
        it but followers' fetches, which only note it (their next answer carries it)."""
        key = (topic, partition)
        for watch in self._waiting.get(key, ()):
            if watch.replica:
                watch.mark(key)
            else:
                watch.wake(key)

    def wake_all(self) -> None:
        for watches in self._waiting.values():
            for watch in watches:
                watch.wake()

    def watch(self, watch: Watch, keys: Iterable[Key]) -> None:
        """Register `watch` for `keys` until `unwatch` (a follower's fetch session)."""
        for key in keys:
            self._waiting.setdefault(key, set()).add(watch)

    def unwatch(self, watch: Watch, keys: Iterable[Key]) -> None:
        for key in keys:
            watches = self._waiting.get(key)
            if watches is not None:
                watches.discard(watch)
                if not watches:
                    del self._waiting[key]

    def watching(self, keys: Iterable[Key], replica: bool = False) -> _Watching:
        """A Watch woken when any of `keys` changes, registered until the block ends;
        `replica`: a follower's fetch (see the module docstring)."""
        return _Watching(self, list(dict.fromkeys(keys)), Watch(replica))

    async def settle(
        self,
        pending: Sequence[T],
        key: Callable[[T], Key],
        settled: Callable[[T], bool],
        timeout_ms: int,
    ) -> list[T]:
        """A request's partitions parked until each is `settled` (checked again whenever one
        of their partitions changes; `settled` records the answer), or until `timeout_ms`
        passed; the ones still unsettled then, in order (acks=all produces and DeleteRecords:
        Kafka's purgatories)."""
        if not pending:
            return []
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000
        waiting = list(pending)
        with self.watching(key(item) for item in waiting) as watch:
            while True:
                waiting = [item for item in waiting if not settled(item)]
                if not waiting or trio.current_time() >= deadline:
                    return waiting
                with trio.move_on_at(deadline):
                    await watch.wait()

    def parked(self) -> int:
        """How many (fetch, partition) registrations exist (for tests)."""
        return sum(len(e) for e in self._waiting.values())


class _Watching:
    """`DataWaiters.watching`'s context manager (a class: every acks=all Produce and parked
    Fetch enters one, and a generator context manager costs several times as much)."""

    __slots__ = ("keys", "waiters", "watch")

    def __init__(self, waiters: DataWaiters, keys: list[Key], watch: Watch) -> None:
        self.waiters, self.keys, self.watch = waiters, keys, watch

    def __enter__(self) -> Watch:
        self.waiters.watch(self.watch, self.keys)
        return self.watch

    def __exit__(self, *exc: object) -> None:
        self.waiters.unwatch(self.watch, self.keys)
