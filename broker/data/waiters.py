"""Wake-ups for long-polling fetches when partition data changes.

A Fetch that has not gathered `min_bytes` parks on the partitions it reads
(Kafka's fetch purgatory). A produce with acks=all parks here too until the high watermark
passes its records (Kafka's produce purgatory): the leader's `ReplicationManager` calls
`changed` whenever a partition's high watermark moves. Produce calls `changed(topic, partition)` after an
append, DeleteRecords after moving the log start, and any metadata change
wakes everyone (a partition may have gone away). Each parked fetch owns one
`Watch`, so waking is O(waiters of that partition) and a parked fetch
never holds up any other connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from strom.broker.state import BrokerState

Key = tuple[str, int]


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

    @classmethod
    def of(cls, broker: BrokerState) -> DataWaiters:
        return broker.service(cls, _make)

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

    def parked(self) -> int:
        """How many (fetch, partition) registrations exist (for tests)."""
        return sum(len(e) for e in self._waiting.values())


def _make(broker: BrokerState) -> DataWaiters:
    from strom.broker.replication.manager import ReplicationManager

    waiters = DataWaiters()
    broker.controller.subscribe(lambda _image: waiters.wake_all())
    ReplicationManager.of(broker).high_watermark_listeners.append(waiters.changed)
    return waiters
