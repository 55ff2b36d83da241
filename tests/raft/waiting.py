"""Waiting on in-process Raft nodes: re-check a condition at every change any node reports."""

from __future__ import annotations

from collections.abc import Callable

import trio


async def until(done: Callable[[], bool], changes: Callable[[], list[trio.Event]], timeout_s: float) -> None:
    """Wait until `done()` holds; `changes()` gives each running node's next-change event.

    The events are taken BEFORE `done()` is read, so a change between the check and the wait
    is not missed (waiting for "the next change" after the check would sleep through it).
    """
    with trio.fail_after(timeout_s):
        while True:
            events = changes()
            if done():
                return
            async with trio.open_nursery() as waiters:
                for event in events:

                    async def wake(changed: trio.Event = event) -> None:
                        await changed.wait()
                        waiters.cancel_scope.cancel()

                    waiters.start_soon(wake)
