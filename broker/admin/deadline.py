"""`timeout_ms` of CreateTopics, DeleteTopics and CreatePartitions, as KRaft reads it.

Kafka turns the timeout into a deadline for the controller event: an event
still queued when the deadline passes fails with a TimeoutException, so every
entry of the request gets REQUEST_TIMED_OUT (no message) and nothing changes;
a timeout <= 0 has always passed by the time the controller looks. Once the
event runs, the timeout no longer matters. The driver runs one command at a
time behind a FIFO lock, so "queued" is "waiting for that lock": cancellation
while waiting leaves nothing done, and once the command holds the lock its
commit is shielded and completes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

R = TypeVar("R")


async def before_deadline(timeout_ms: int, command: Callable[[], Awaitable[R]]) -> R | None:
    """Run `command` if it starts within `timeout_ms`; None means it timed out, undone."""
    if timeout_ms <= 0:
        return None
    outcome: list[R] = []
    with trio.move_on_after(timeout_ms / 1000):
        outcome.append(await command())
    return outcome[0] if outcome else None
