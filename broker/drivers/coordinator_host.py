"""`CoordinatorHost`: what the group and transaction drivers share in hosting their state
machines over an internal topic.

Both machines park responses under waiter tokens, emit records to append with acks=all and
take each write's outcome back as an input. The host keeps the parked responses (released
when the machine hands them out; NOT_COORDINATOR for every one still waiting at shutdown),
runs each replicated write's wait for the ISR in its own task and reports its outcome, and
creates the topic on first use. A driver supplies its machine's calls: `_settle` (write what
the machine emitted, release its replies) and `_write_completed`, and its own background
tasks through `_background`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from strom.broker.drivers.coordinator_topic import CoordinatorTopic, Replicated
from strom.wire.errors import ErrorCode

R = TypeVar("R")


@dataclass
class _Parked:
    """A response waiting to be released; `result` stays None if it never is (shutdown)."""

    event: trio.Event = field(default_factory=trio.Event)
    result: Any = None


class CoordinatorHost:
    def __init__(self, topic: CoordinatorTopic, clock: Callable[[], int]) -> None:
        self.topic = topic
        self._clock = clock
        self._tokens = itertools.count(1)
        self._parked: dict[int, _Parked] = {}
        self._kick = trio.Event()
        self._create_lock = trio.Lock()
        self._closed = False
        self.owned: Container[int] = set()
        """Partitions this node leads and has loaded: it coordinates their keys."""
        self.loading: Container[int] = {}
        """Partitions being loaded (COORDINATOR_LOAD_IN_PROGRESS)."""
        self._to_wait, self._wait_queue = trio.open_memory_channel[tuple[int, Replicated]](math.inf)

    def now(self) -> int:
        return self._clock()

    @property
    def closed(self) -> bool:
        """Shut down: every request is answered NOT_COORDINATOR."""
        return self._closed

    # --- what a driver supplies ---------------------------------------------------------------

    def _settle(self) -> None:
        """Fire due deadlines, write what the machine emitted, release its replies
        (`_release`), wake the timer (`_kick`)."""
        raise NotImplementedError

    def _write_completed(self, token: int, error: ErrorCode) -> None:
        """Report a write's outcome to the machine."""
        raise NotImplementedError

    def follow(self) -> None:
        """Load the partitions this node now leads, unload those it no longer leads."""
        raise NotImplementedError

    def coordinator_error(self, key: str) -> ErrorCode:
        """Whether this node coordinates `key` (a group or transactional id): see
        `_partition_error`."""
        raise NotImplementedError

    async def _background(self, nursery: trio.Nursery) -> None:
        """The driver's own tasks (loading, timers, ...), until cancelled."""
        raise NotImplementedError

    # --- the shared machinery -----------------------------------------------------------------

    async def run(self) -> None:
        """The background tasks, until cancelled; then every parked response is released
        with NOT_COORDINATOR, as a Kafka coordinator that resigns answers."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._replication_waits, nursery)
                await self._background(nursery)
        finally:
            self._closed = True
            for parked in self._parked.values():
                parked.event.set()  # no result: NOT_COORDINATOR
            self._parked.clear()

    async def _replication_waits(self, nursery: trio.Nursery) -> None:
        """Wait for each replicated write in its own task, then report its outcome."""
        async for token, replicated in self._wait_queue:
            nursery.start_soon(self._complete, token, replicated)

    async def _complete(self, token: int, replicated: Replicated) -> None:
        error = await replicated()
        if self.closed:
            return
        self._write_completed(token, error)
        self._settle()

    def _appended(self, token: int, outcome: ErrorCode | Replicated) -> None:
        """An append's outcome: reported now, or once the ISR holds it."""
        if isinstance(outcome, ErrorCode):
            self._write_completed(token, outcome)
        else:
            self._to_wait.send_nowait((token, outcome))

    def _partition_error(self, partition: int) -> ErrorCode:
        """NONE if this node coordinates the keys of `partition` (it leads the partition and
        has loaded it), COORDINATOR_LOAD_IN_PROGRESS while it loads, else NOT_COORDINATOR (the
        client looks the coordinator up again), as Kafka's coordinators answer."""
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        if partition not in self.owned and partition not in self.loading:
            self.follow()  # the image may have changed since the last follow
        if partition in self.owned:
            return ErrorCode.NONE
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    async def ready(self, key: str) -> ErrorCode:
        """The topic exists (created on first use) and this node coordinates `key`."""
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        error = await self.ensure_topic()
        return error or self.coordinator_error(key)

    async def ensure_topic(self) -> ErrorCode:
        """The internal topic exists (created on first use, as Kafka does)."""
        if self.topic.partitions() is not None:
            return ErrorCode.NONE
        async with self._create_lock:
            return await self.topic.create()

    async def _request(self, call: Callable[..., R | None], refused: Callable[[ErrorCode], R]) -> R:
        """`call(now=, waiter=)`: its result now, or the one the machine releases under the
        waiter token later; `refused(NOT_COORDINATOR)` at shutdown."""
        if self._closed:
            return refused(ErrorCode.NOT_COORDINATOR)
        token = next(self._tokens)
        parked = self._parked[token] = _Parked()
        try:
            result = call(now=self.now(), waiter=token)
            self._settle()
            if result is None:
                await parked.event.wait()
                if parked.result is None:
                    return refused(ErrorCode.NOT_COORDINATOR)
                released: R = parked.result
                return released
            return result
        finally:
            self._parked.pop(token, None)

    def _release(self, replies: Iterable[tuple[int, object]]) -> None:
        for token, result in replies:
            parked = self._parked.get(token)
            if parked is not None and parked.result is None:
                parked.result = result
                parked.event.set()
        self._kick.set()
