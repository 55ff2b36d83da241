"""DataWaiters: who is woken by what, and which partitions a woken watch reports."""

from __future__ import annotations

import pytest
import trio

from strom.broker.data.waiters import ALL, DataWaiters

pytestmark = pytest.mark.trio

A, B = ("t", 0), ("t", 1)


async def test_a_watch_reports_the_partitions_that_changed() -> None:
    waiters = DataWaiters()
    with waiters.watching([A, B]) as watch:
        waiters.changed(*B)
        assert await watch.wait() == {B}
        waiters.changed(*A)
        waiters.changed(*B)
        assert await watch.wait() == {A, B}
        waiters.wake_all()
        assert await watch.wait() is ALL


async def test_followers_wake_on_appends_and_the_others_on_the_high_watermark() -> None:
    waiters = DataWaiters()
    with waiters.watching([A], replica=True) as follower, waiters.watching([A]) as consumer:
        waiters.high_watermark_moved(*A)
        assert not follower.event.is_set()
        assert await consumer.wait() == {A}
        waiters.appended(*A)
        assert not consumer.event.is_set()
        assert await follower.wait() == {A}
        waiters.changed(*A)  # a single-replica partition's append: both
        assert await follower.wait() == {A}
        assert await consumer.wait() == {A}


async def test_watches_are_removed_with_their_block() -> None:
    waiters = DataWaiters()
    with waiters.watching([A, B], replica=True):
        assert waiters.parked() == 2
    assert waiters.parked() == 0
    waiters.appended(*A)  # nobody left to wake
    with trio.move_on_after(0.01):
        with waiters.watching([A]) as watch:
            await watch.wait()
            raise AssertionError("woken by an earlier change")
