"""ReplicaSet: high watermark, caught-up time, ISR shrink/expand and acks=all, on a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.broker.replication.replica_set import ReplicaSet, StaleFetch
from strom.wire.errors import ErrorCode

LAG_MS = 30_000
LIVE = {2: -1, 3: -1}
"""Brokers 2 and 3 may join; this test's fetches name no broker epoch (-1)."""


def _set(isr: tuple[int, ...] = (1, 2, 3), *, hw: int = 0, epoch_start: int = 0) -> ReplicaSet:
    return ReplicaSet(
        1, (1, 2, 3), isr, high_watermark=hw, leader_epoch_start=epoch_start,
        lag_time_max_ms=LAG_MS, now_ms=0,
    )  # fmt: skip


def test_the_high_watermark_is_the_smallest_end_offset_in_the_isr() -> None:
    replicas = _set()
    assert not replicas.follower_fetched(2, 10, leader_end=10, now_ms=1)
    assert replicas.high_watermark == 0  # broker 3 has not fetched yet
    assert replicas.follower_fetched(3, 7, leader_end=10, now_ms=2)
    assert replicas.high_watermark == 7
    replicas.follower_fetched(3, 10, leader_end=10, now_ms=3)
    assert replicas.high_watermark == 10


def test_the_high_watermark_never_moves_back() -> None:
    replicas = _set(hw=5)
    replicas.follower_fetched(2, 3, leader_end=10, now_ms=1)
    replicas.follower_fetched(3, 3, leader_end=10, now_ms=1)
    assert replicas.high_watermark == 5


def test_a_follower_outside_the_isr_does_not_hold_the_high_watermark_back() -> None:
    replicas = _set((1, 2))
    replicas.follower_fetched(2, 10, leader_end=10, now_ms=1)
    assert replicas.high_watermark == 10


def test_strict_min_isr_holds_the_high_watermark_below_min_insync_replicas() -> None:
    replicas = _set((1, 2))
    replicas.min_isr = 3  # ELR enabled, min.insync.replicas=3: an ISR of 2 commits nothing
    assert not replicas.follower_fetched(2, 10, leader_end=10, now_ms=1)
    assert replicas.high_watermark == 0
    replicas.committed((1, 2, 3))
    replicas.follower_fetched(3, 10, leader_end=10, now_ms=2)
    assert replicas.high_watermark == 10
    capped = _set((1, 2, 3))
    capped.min_isr = 5  # capped at the replication factor (3)
    capped.follower_fetched(2, 4, leader_end=4, now_ms=1)
    assert capped.follower_fetched(3, 4, leader_end=4, now_ms=1)
    off = _set((1,))
    assert off.advance(7)
    assert off.high_watermark == 7


def test_a_lagging_follower_leaves_the_isr_after_the_lag_time_only() -> None:
    replicas = _set()
    replicas.follower_fetched(2, 10, leader_end=10, now_ms=1000)
    replicas.follower_fetched(3, 4, leader_end=10, now_ms=1000)
    assert replicas.proposal(10, now_ms=LAG_MS, eligible=LIVE) is None
    shrink = replicas.proposal(10, now_ms=LAG_MS + 1, eligible=LIVE)
    assert shrink is not None
    assert shrink.isr == frozenset({1, 2})
    # while the shrink is in flight, broker 3 still counts for the high watermark
    assert replicas.counted() == frozenset({1, 2, 3})
    assert replicas.proposal(10, now_ms=LAG_MS + 2, eligible=LIVE) is None  # one at a time
    replicas.committed((1, 2))
    assert replicas.pending is None
    replicas.advance(10)
    assert replicas.high_watermark == 10


def test_a_follower_that_keeps_up_with_a_busy_leader_stays_in_sync() -> None:
    """Each fetch reaches where the leader ended at the previous fetch, never its current end:
    caught up as of the previous fetch, so never lagging longer than one fetch interval."""
    replicas = _set((1, 2))
    end = 0
    for step in range(1, 200):
        now = step * 1000
        replicas.follower_fetched(2, end, leader_end=end + 100, now_ms=now)
        end += 100
        assert replicas.proposal(end, now_ms=now, eligible=LIVE) is None


def test_a_quiet_partition_of_a_fetch_session_stays_caught_up() -> None:
    """A follower's session leaves a quiet partition unread (the follower at the log end,
    nothing appended); when it is next read, `quiet_since_ms` says the follower was caught up
    then, as Kafka's read of it on every fetch would have."""
    replicas = _set()
    for follower in (2, 3):
        replicas.follower_fetched(follower, 10, leader_end=10, now_ms=1_000)
    # quiet from t=1s; appended at t=100s; the next fetch (started at t=99.9s) reads it
    replicas.follower_fetched(2, 10, leader_end=11, now_ms=100_000, quiet_since_ms=99_900)
    replicas.follower_fetched(3, 10, leader_end=11, now_ms=100_000)  # no session: no hint
    proposal = replicas.proposal(11, 100_100, LIVE)
    assert proposal is not None
    assert proposal.isr == {1, 2}
    # a hint for a follower that was behind at its last read proves nothing
    behind = _set()
    behind.follower_fetched(2, 5, leader_end=10, now_ms=1_000)
    behind.follower_fetched(2, 5, leader_end=11, now_ms=100_000, quiet_since_ms=99_900)
    assert behind.followers[2].last_caught_up_ms < 2_000


def test_the_isr_check_asks_the_session_about_a_partition_it_left_quiet() -> None:
    """Caught up at its last read (t=1s), then quiet in its session, whose latest fetch started
    at t=99.5s: an append at t=100s finds the follower caught up as of 99.5s, until the lag
    time has passed since then. A follower behind at its last read gets no such credit."""
    asked: list[tuple[int, int | None]] = []

    def quiet_since(replica: int, epoch: int | None) -> int:
        asked.append((replica, epoch))
        return 99_500 if replica == 2 else -1

    replicas = _set()
    replicas.follower_fetched(2, 10, leader_end=10, now_ms=1_000)
    replicas.follower_fetched(3, 10, leader_end=10, now_ms=1_000)
    # the leader appended (log end 11); broker 3's session has not fetched since t=1s
    proposal = replicas.proposal(11, 100_100, LIVE, quiet_since=quiet_since)
    assert proposal is not None
    assert proposal.isr == {1, 2}
    assert asked == [(2, -1), (3, -1)]
    later = _set()
    later.follower_fetched(2, 10, leader_end=10, now_ms=1_000)
    later.follower_fetched(3, 10, leader_end=10, now_ms=1_000)
    shrink = later.proposal(11, 99_500 + LAG_MS + 1, LIVE, quiet_since=quiet_since)
    assert shrink is not None
    assert shrink.isr == {1}
    behind = _set((1, 2))
    behind.follower_fetched(2, 5, leader_end=10, now_ms=1_000)
    shrink = behind.proposal(11, 100_100, LIVE, quiet_since=quiet_since)
    assert shrink is not None
    assert shrink.isr == {1}
    # the session is only asked when the follower would otherwise leave
    asked.clear()
    idle = _set()
    idle.follower_fetched(2, 10, leader_end=10, now_ms=1_000)
    idle.follower_fetched(3, 10, leader_end=10, now_ms=1_000)
    assert idle.proposal(10, 100_100, LIVE, quiet_since=quiet_since) is None  # at the log end
    assert asked == []


def test_a_follower_rejoins_once_at_the_high_watermark_and_in_the_leaders_epoch() -> None:
    replicas = _set((1, 2), hw=0, epoch_start=8)
    replicas.follower_fetched(2, 10, leader_end=10, now_ms=1)
    assert replicas.high_watermark == 10
    replicas.follower_fetched(3, 9, leader_end=10, now_ms=1)
    assert replicas.proposal(10, now_ms=2, eligible=LIVE) is None  # below the high watermark
    replicas.follower_fetched(3, 10, leader_end=10, now_ms=3)
    assert replicas.proposal(10, now_ms=3, eligible={2: -1}) is None  # fenced: may not join
    expand = replicas.proposal(10, now_ms=3, eligible=LIVE)
    assert expand is not None
    assert expand.isr == frozenset({1, 2, 3})


def test_a_refused_proposal_can_be_made_again() -> None:
    replicas = _set((1, 2))
    replicas.follower_fetched(2, 5, leader_end=5, now_ms=1)
    replicas.follower_fetched(3, 5, leader_end=5, now_ms=1)
    first = replicas.proposal(5, now_ms=1, eligible=LIVE)
    assert first is not None
    assert first.isr == frozenset({1, 2, 3})
    replicas.proposal_refused(first)
    again = replicas.proposal(5, now_ms=2, eligible=LIVE)
    assert again is not None
    assert again.isr == frozenset({1, 2, 3})
    replicas.proposal_refused(first)  # an answer to the earlier one settles nothing now
    assert replicas.pending is again


def test_a_proposal_in_flight_counts_until_settled() -> None:
    """Until the controller's answer or newer metadata settles an expansion, the follower it
    adds holds the high watermark back (the controller may count it in the ISR already)."""
    replicas = _set((1, 2))
    replicas.follower_fetched(2, 5, leader_end=5, now_ms=1)
    replicas.follower_fetched(3, 5, leader_end=5, now_ms=1)
    assert replicas.high_watermark == 5
    assert replicas.proposal(5, now_ms=1, eligible=LIVE) is not None
    replicas.follower_fetched(2, 8, leader_end=8, now_ms=2)
    assert replicas.high_watermark == 5  # broker 3 is at 5
    replicas.committed((1, 2))  # the metadata says: not added
    assert replicas.pending is None
    assert replicas.advance(8)
    assert replicas.high_watermark == 8


def test_broker_epochs_fence_an_older_incarnation() -> None:
    """KIP-903: a fetch naming an older broker epoch than an earlier one is stale; a newer one
    (or the metadata naming a newer registration) starts the follower afresh; only a follower
    whose fetches named its registered epoch may join; AlterPartition names those epochs."""
    replicas = _set((1, 2))
    replicas.follower_fetched(2, 5, leader_end=5, now_ms=1)  # high watermark 5
    replicas.follower_fetched(3, 5, leader_end=5, now_ms=1, broker_epoch=40)
    with pytest.raises(StaleFetch):
        replicas.follower_fetched(3, 5, leader_end=5, now_ms=2, broker_epoch=39)
    assert replicas.proposal(5, now_ms=2, eligible={2: 10, 3: 41}) is None  # registered anew
    replicas.registered(3, 41)
    assert replicas.followers[3].log_end_offset == -1  # forgotten
    replicas.follower_fetched(3, 4, leader_end=5, now_ms=3, broker_epoch=41)
    assert replicas.proposal(5, now_ms=3, eligible={2: 10, 3: 41}) is None  # behind
    replicas.follower_fetched(3, 5, leader_end=5, now_ms=4, broker_epoch=41)
    expand = replicas.proposal(5, now_ms=4, eligible={2: 10, 3: 41})
    assert expand is not None
    assert replicas.member_epochs(expand.isr, 7) == [(1, 7), (2, -1), (3, 41)]
    fresh = _set((1, 2))
    fresh.follower_fetched(3, 5, leader_end=5, now_ms=1, broker_epoch=40)
    fresh.follower_fetched(3, 6, leader_end=6, now_ms=2, broker_epoch=45)  # restarted
    assert fresh.followers[3].broker_epoch == 45
    assert fresh.followers[3].last_caught_up_ms == 2


def test_acks_all_waits_for_the_high_watermark_and_checks_min_insync() -> None:
    replicas = _set((1, 2))
    assert replicas.check_before_append(2) is ErrorCode.NONE
    assert replicas.check_before_append(3) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert replicas.acks_all_outcome(last_offset=4, min_insync_replicas=2) is None
    replicas.follower_fetched(2, 5, leader_end=5, now_ms=1)
    assert replicas.acks_all_outcome(last_offset=4, min_insync_replicas=2) is ErrorCode.NONE
    replicas.committed((1,))
    outcome = replicas.acks_all_outcome(last_offset=4, min_insync_replicas=2)
    assert outcome is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([2, 3]),  # which follower fetches
            st.integers(0, 50),  # how far the leader's log grew first
            st.integers(0, 100),  # how far behind the fetch is
            st.integers(0, 40_000),  # time passing
            st.booleans(),  # whether the leader then proposes an ISR change (committed at once)
        ),
        max_size=60,
    )
)
def test_invariants_under_any_fetch_sequence(
    steps: list[tuple[int, int, int, int, bool]],
) -> None:
    """The high watermark never moves back, never passes the leader's end nor the end of a
    counted follower, and the leader is always in the ISR it proposes."""
    replicas = _set()
    leader_end, now = 0, 0
    ends = {2: 0, 3: 0}
    for follower, grow, behind, elapsed, propose in steps:
        leader_end += grow
        now += elapsed
        offset = max(ends[follower], leader_end - behind)  # followers never go back here
        ends[follower] = offset
        before = replicas.high_watermark
        replicas.follower_fetched(follower, offset, leader_end, now)
        assert before <= replicas.high_watermark <= leader_end
        if replicas.high_watermark > before:
            for member in replicas.counted() - {1}:
                assert replicas.high_watermark <= ends[member]
        if propose:
            proposed = replicas.proposal(leader_end, now, eligible=LIVE)
            if proposed is not None:
                assert 1 in proposed.isr
                replicas.committed(proposed.isr)


def test_a_reassignment_adds_and_forgets_followers() -> None:
    rs = ReplicaSet(
        1, [1, 2], [1, 2], high_watermark=0, leader_epoch_start=0, lag_time_max_ms=1000, now_ms=0
    )
    rs.reassigned([1, 2, 3])
    assert set(rs.followers) == {2, 3}
    assert rs.followers[3].log_end_offset == -1
    rs.follower_fetched(3, 0, 0, now_ms=1)
    expand = rs.proposal(0, 2, eligible={1: -1, 2: -1, 3: -1})
    assert expand is not None
    assert expand.isr == frozenset({1, 2, 3})
    rs.reassigned([1, 3])
    assert set(rs.followers) == {3}
