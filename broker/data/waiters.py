"""Wake-ups for long-polling fetches when partition data changes.

A Fetch that has not gathered `min_bytes` parks on the partitions it reads
(Kafka's fetch purgatory). A produce with acks=all parks here too until the high watermark
passes its records (Kafka's produce purgatory), and a DeleteRecords until the low watermark
reaches its offsets (`settle` runs both): the leader's `ReplicationManager` calls
`changed` whenever a partition's high watermark moves. Produce calls `changed(topic, partition)` after an
append, DeleteRecords after moving the log start, and any metadata change
wakes everyone (a partition may have gone away). Each parked fetch owns one
`Watch`, so waking is O(waiters of that partition) and a parked fetch
never holds up any other connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import trio

Key = tuple[str, int]
T = TypeVar("T")


class Watch:
    """One parked fetch: `wait()` returns once a watched partition changed since the last wait."""

    def __init__(self) -> None:
        self.event = trio.Event()

    def wake(self) -> None:
        self.event.set()

    async def wait(self) -> None:
        await self.event.wait()
        self.event = trio.Event()


class DataWaiters:
    """Per-partition sets of parked fetches' events."""

    def __init__(self) -> None:
        self._waiting: dict[Key, set[Watch]] = {}

    def changed(self, topic: str, partition: int) -> None:
        """Wake every fetch parked on this partition."""
        for watch in self._waiting.get((topic, partition), ()):
            watch.wake()

    def wake_all(self) -> None:
        for watches in self._waiting.values():
            for watch in watches:
                watch.wake()

    @contextmanager
    def watching(self, keys: Iterable[Key]) -> Iterator[Watch]:
        """A Watch woken when any of `keys` changes, registered until the block ends."""
        watch = Watch()
        registered = list(dict.fromkeys(keys))
        for key in registered:
            self._waiting.setdefault(key, set()).add(watch)
        try:
            yield watch
        finally:
            for key in registered:
                watches = self._waiting.get(key)
                if watches is not None:
                    watches.discard(watch)
                    if not watches:
                        del self._waiting[key]

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

