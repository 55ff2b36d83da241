"""The event-loop time each connection's requests take, for `request_percentage` quotas.

Kafka's request quota (KIP-124) measures the time a client's requests occupy the broker's
request handler threads and network threads. A Strom broker has one thread that runs
requests: trio's event loop. Each connection is one trio task, and that task does all of a
request's work that runs on the loop: reading and decrypting its bytes, parsing, the handler
(authorization, appending to or reading from the log, building the answer), encoding, and
encrypting and writing the response. So a request's handler-and-network time is the time the
loop spends running its connection's task, and trio tells us exactly that: an `Instrument`'s
`before_task_step` and `after_task_step` bracket every slice of a task's work between two
awaits. Time a task spends waiting (for the network, for replication to acknowledge, in a
long-poll fetch, for a worker thread's fsync or large read) runs no step and is not counted,
as Kafka does not count a request's time in purgatory.

What is not counted: work done for the client by other tasks (followers replicating its
records, the group coordinator's timers) and by worker threads (`trio.to_thread`), as Kafka
does not charge a client for replica fetchers or log flushes either.

The instrument is installed only while some `request_percentage` quota exists (`LoopTime.
enable` / `disable`), so brokers without one pay nothing; with one, every task step costs two
clock reads.
"""

from __future__ import annotations

import time

import trio


class LoopTime(trio.abc.Instrument):
    """Seconds of event-loop time per task since it was last `take`n."""

    def __init__(self) -> None:
        self._spent: dict[trio.lowlevel.Task, float] = {}
        self._started = 0.0
        self.enabled = False

    def enable(self) -> None:
        if not self.enabled:
            trio.lowlevel.add_instrument(self)
            self.enabled = True
            self._started = time.perf_counter()  # the calling task's step counts from here

    def disable(self) -> None:
        if self.enabled:
            trio.lowlevel.remove_instrument(self)
            self.enabled = False
            self._spent.clear()

    def take(self) -> float:
        """The calling task's loop time since the last call (its current step included), reset."""
        task = trio.lowlevel.current_task()
        spent = self._spent.pop(task, 0.0)
        if self.enabled:
            now = time.perf_counter()
            spent += now - self._started
            self._started = now  # the rest of this step counts towards the next take
        return spent

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        spent = self._spent
        spent[task] = spent.get(task, 0.0) + time.perf_counter() - self._started

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._spent.pop(task, None)
