"""Focused tests of the Raft core's rules, one input at a time."""

from __future__ import annotations

import random

import pytest

from strom.coordinator.raft.core import RaftConfig, RaftCore, RaftSafetyError
from strom.coordinator.raft.effects import (
    AppendEntries,
    Effect,
    HighWatermark,
    InstallSnapshot,
    LeaderChange,
    PersistQuorumState,
    Send,
    SnapshotLoaded,
    TruncateTo,
)
from strom.coordinator.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from strom.coordinator.raft.states import Role
from strom.storage.raft.raft_store import Entry, QuorumState, RecoveredState, SnapshotId
from strom.wire.errors import ErrorCode

VOTERS = frozenset({1, 2, 3})


def make(
    node_id: int = 1,
    *,
    epoch: int = 0,
    leader: int = -1,
    voted: int = -1,
    entries: list[tuple[int, int]] | None = None,
    snapshot: SnapshotId | None = None,
    snapshot_data: bytes = b"",
    voters: frozenset[int] = VOTERS,
    config: RaftConfig | None = None,
) -> RaftCore:
    """A core recovered from the given state; `entries` are (offset, epoch) pairs."""
    log = [Entry(o, e, b"x%d" % o) for o, e in entries or []]
    start = snapshot.end_offset if snapshot else (log[0].offset if log else 0)
    recovered = RecoveredState(
        QuorumState(epoch, leader, voted, voters), snapshot, snapshot_data, log, start
    )
    return RaftCore(node_id, voters, recovered, random.Random(1), 0, config)


def role(core: RaftCore) -> Role:
    """The role now (a call, so the type checker does not pin it between inputs)."""
    return core.role


def drain(core: RaftCore, now: int = 0) -> list[Effect]:
    """Take the effects, acknowledging every write (a disk that keeps up)."""
    effects: list[Effect] = []
    while True:
        batch = core.take_effects()
        if not batch:
            return effects
        effects += batch
        seqs = [e.seq for e in batch if hasattr(e, "seq")]
        if seqs:
            core.writes_durable(max(seqs), now)


def sent(effects: list[Effect], kind: type[RaftMessage]) -> list[Send]:
    return [e for e in effects if isinstance(e, Send) and isinstance(e.message, kind)]


def reply_of(effects: list[Effect], kind: type[RaftMessage]) -> RaftMessage:
    found = sent(effects, kind)
    assert len(found) == 1, effects
    return found[0].message


def vote(
    epoch: int, candidate: int, last_epoch: int, end: int, *, pre: bool = False
) -> VoteRequest:
    return VoteRequest(77, epoch, candidate, last_epoch, end, pre)


def elect(core: RaftCore, now: int = 5000) -> list[Effect]:
    """Drive `core` (voter 1 of three) from Unattached to Leader."""
    drain(core)
    core.tick(now)
    effects = drain(core, now)
    assert role(core) is Role.PROSPECTIVE
    core.receive(2, VoteResponse(0, 0, core.epoch, -1, True, True), now)
    effects = drain(core, now)
    assert role(core) is Role.CANDIDATE
    core.receive(2, VoteResponse(0, 0, core.epoch, -1, True, False), now)
    effects = drain(core, now)
    assert role(core) is Role.LEADER
    return effects


# --- votes ----------------------------------------------------------------------------------


def test_a_vote_is_persisted_before_it_is_sent_and_granted_once_per_epoch() -> None:
    core = make(epoch=1)
    drain(core)
    core.receive(2, vote(2, 2, 0, 0), 10)
    effects = core.take_effects()
    assert any(isinstance(e, PersistQuorumState) and e.state.voted_id == 2 for e in effects)
    assert not sent(effects, VoteResponse), "the grant must wait for the vote to be durable"
    seq = max(e.seq for e in effects if isinstance(e, PersistQuorumState))
    core.writes_durable(seq, 10)
    response = reply_of(core.take_effects(), VoteResponse)
    assert isinstance(response, VoteResponse)
    assert response.granted
    assert role(core) is Role.VOTED
    assert core.epoch == 2

    core.receive(3, vote(2, 3, 0, 0), 11)
    refused = reply_of(drain(core), VoteResponse)
    assert isinstance(refused, VoteResponse)
    assert not refused.granted

    core.receive(2, vote(2, 2, 0, 0), 12)
    again = reply_of(drain(core), VoteResponse)
    assert isinstance(again, VoteResponse)
    assert again.granted


@pytest.mark.parametrize(
    ("last_epoch", "end", "granted"),
    [(1, 10, False), (2, 4, False), (2, 5, True), (3, 1, True)],
)
def test_votes_go_only_to_candidates_with_logs_at_least_as_fresh(
    last_epoch: int, end: int, granted: bool
) -> None:
    core = make(epoch=2, entries=[(0, 1), (1, 1), (2, 2), (3, 2), (4, 2)])
    drain(core)
    core.receive(2, vote(3, 2, last_epoch, end), 10)
    response = reply_of(drain(core), VoteResponse)
    assert isinstance(response, VoteResponse)
    assert response.granted is granted


def test_a_vote_from_an_older_epoch_is_fenced() -> None:
    core = make(epoch=4)
    drain(core)
    core.receive(2, vote(3, 2, 9, 99), 10)
    response = reply_of(drain(core), VoteResponse)
    assert isinstance(response, VoteResponse)
    assert response.error == ErrorCode.FENCED_LEADER_EPOCH
    assert response.epoch == 4


def test_a_pre_vote_changes_no_state() -> None:
    core = make(epoch=1)
    drain(core)
    core.receive(2, vote(5, 2, 0, 0, pre=True), 10)
    effects = drain(core)
    response = reply_of(effects, VoteResponse)
    assert isinstance(response, VoteResponse)
    assert response.granted
    assert response.pre_vote
    assert not [e for e in effects if isinstance(e, PersistQuorumState)]
    assert core.epoch == 1
    assert core.voted_id == -1


def test_a_follower_that_hears_from_its_leader_refuses_pre_votes() -> None:
    core = make(epoch=3, leader=2)
    fetch = reply_of(drain(core), FetchRequest)
    core.receive(2, vote(3, 3, 9, 99, pre=True), 10)
    before_contact = reply_of(drain(core), VoteResponse)
    assert isinstance(before_contact, VoteResponse)
    assert before_contact.granted

    core.receive(2, FetchResponse(fetch.request_id, 0, 3, 2, 0, 0), 20)
    drain(core, 20)
    core.receive(3, vote(3, 3, 9, 99, pre=True), 30)
    after_contact = reply_of(drain(core, 30), VoteResponse)
    assert isinstance(after_contact, VoteResponse)
    assert not after_contact.granted


def test_election_runs_pre_vote_then_vote_then_writes_the_leader_entry() -> None:
    core = make(epoch=1, entries=[(0, 1)])
    drain(core)
    assert core.next_deadline() >= RaftConfig().election_timeout_ms
    core.tick(core.next_deadline())
    effects = drain(core, 5000)
    pre_votes = sent(effects, VoteRequest)
    assert {s.dest for s in pre_votes} == {2, 3}
    assert all(isinstance(s.message, VoteRequest) and s.message.pre_vote for s in pre_votes)
    assert core.epoch == 1, "a pre-vote does not bump the epoch"

    core = make(epoch=1, entries=[(0, 1)])
    effects = elect(core)
    assert core.epoch == 2
    assert core.voted_id == 1
    appended = [e for e in effects if isinstance(e, AppendEntries)]
    assert appended
    assert appended[0].entries == (Entry(1, 2, b"", control=True),)
    assert {s.dest for s in sent(effects, BeginQuorumEpochRequest)} == {2, 3}


def test_a_lost_pre_vote_rejoins_the_known_leader() -> None:
    core = make(epoch=3, leader=2)
    drain(core)
    core.tick(RaftConfig().fetch_timeout_ms)
    drain(core, 2000)
    assert role(core) is Role.PROSPECTIVE
    core.receive(2, VoteResponse(0, 0, 3, 2, False, True), 2001)
    core.receive(3, VoteResponse(0, 0, 3, 2, False, True), 2001)
    effects = drain(core, 2001)
    assert role(core) is Role.FOLLOWER
    assert core.leader_id == 2
    assert sent(effects, FetchRequest)


# --- replication ----------------------------------------------------------------------------


def fetch(replica: int, offset: int, last_epoch: int, epoch: int) -> FetchRequest:
    return FetchRequest(replica * 1000 + offset, epoch, replica, offset, last_epoch, 0)


def test_the_high_watermark_moves_only_into_the_leaders_own_epoch() -> None:
    core = make(epoch=1, entries=[(o, 1) for o in range(5)])
    elect(core)
    assert core.epoch == 2
    assert core.log.end_offset == 6
    # a majority holds the old-epoch entries: not enough to commit them
    core.receive(2, fetch(2, 5, 1, 2), 5001)
    response = reply_of(drain(core, 5001), FetchResponse)
    assert isinstance(response, FetchResponse)
    assert response.entries[0].offset == 5
    assert core.high_watermark == 0
    # once it holds the leader's own entry, everything below commits
    core.receive(2, fetch(2, 6, 2, 2), 5002)
    effects = drain(core, 5002)
    assert core.high_watermark == 6
    assert HighWatermark(6) in effects


def test_a_fetch_from_a_replica_that_knows_an_older_high_watermark_is_answered_at_once() -> None:
    core = make(epoch=1)
    elect(core)

    def waiting_fetch(replica: int, now: int) -> list[int]:
        """The high watermarks of the responses sent at once."""
        core.receive(replica, FetchRequest(replica * 1000 + now, 2, replica, 1, 2, 500), now)
        answers = [s.message for s in sent(drain(core, now), FetchResponse)]
        return [a.high_watermark for a in answers if isinstance(a, FetchResponse)]

    # voter 2's fetch commits the leader's entry: it hears of it now, not after the long poll
    assert waiting_fetch(2, 5001) == [1]
    # voter 3 was never told that high watermark: answered at once too
    assert waiting_fetch(3, 5002) == [1]
    # nothing new for voter 3 now: its next fetch waits
    assert waiting_fetch(3, 5003) == []


def test_the_leader_counts_its_own_entries_only_once_durable() -> None:
    core = make(epoch=1)
    elect(core)
    core.receive(2, fetch(2, 1, 2, 2), 5001)
    drain(core, 5001)
    assert core.high_watermark == 1
    core.propose([b"a", b"b"], 5002)
    effects = core.take_effects()
    core.receive(2, fetch(2, 3, 2, 2), 5003)
    assert core.high_watermark == 1, "the follower has them, the leader's disk not yet"
    seq = max(e.seq for e in effects if isinstance(e, AppendEntries))
    core.writes_durable(seq, 5004)
    assert core.high_watermark == 3


def test_a_diverging_follower_truncates_to_where_the_logs_agree() -> None:
    leader = make(epoch=2, entries=[(0, 1), (1, 1), (2, 1)])
    elect(leader)  # epoch 3; its entry at 3
    leader.propose([b"p"], 5001)
    drain(leader, 5001)
    leader.receive(2, fetch(2, 6, 2, 3), 5002)
    answer = reply_of(drain(leader, 5002), FetchResponse)
    assert isinstance(answer, FetchResponse)
    assert answer.diverging == SnapshotId(3, 1)
    assert not answer.entries

    follower = make(2, epoch=3, leader=1, entries=[(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (5, 2)])
    request = reply_of(drain(follower), FetchRequest)
    assert isinstance(request, FetchRequest)
    assert (request.fetch_offset, request.last_fetched_epoch) == (6, 2)
    follower.receive(1, FetchResponse(request.request_id, 0, 3, 1, 0, 0, (), SnapshotId(3, 1)), 10)
    effects = drain(follower, 10)
    assert [e.offset for e in effects if isinstance(e, TruncateTo)] == [3]
    again = reply_of(effects, FetchRequest)
    assert isinstance(again, FetchRequest)
    assert (again.fetch_offset, again.last_fetched_epoch) == (3, 1)


def test_a_follower_never_truncates_below_its_high_watermark() -> None:
    follower = make(2, epoch=3, leader=1, entries=[(0, 1), (1, 1), (2, 2)])
    request = reply_of(drain(follower), FetchRequest)
    follower.receive(1, FetchResponse(request.request_id, 0, 3, 1, 3, 0), 10)
    request = reply_of(drain(follower, 10), FetchRequest)
    assert follower.high_watermark == 3
    with pytest.raises(RaftSafetyError):
        follower.receive(
            1, FetchResponse(request.request_id, 0, 3, 1, 3, 0, (), SnapshotId(1, 1)), 20
        )


def test_a_fetch_response_that_does_not_validate_the_position_teaches_no_high_watermark() -> None:
    follower = make(2, epoch=3, leader=1, entries=[(0, 1)])
    request = reply_of(drain(follower), FetchRequest)
    follower.receive(1, FetchResponse(request.request_id, 0, 3, 1, 50, 0, (), SnapshotId(0, 0)), 10)
    drain(follower, 10)
    assert follower.high_watermark == 0
    assert follower.log.end_offset == 0


def test_the_leader_resigns_without_fetches_from_a_majority() -> None:
    timeout = RaftConfig().fetch_timeout_ms
    core = make(epoch=1)
    elect(core, now=5000)
    core.receive(2, fetch(2, 0, 0, 2), 5000 + timeout - 1)
    drain(core)
    core.tick(5000 + timeout + 10)
    assert role(core) is Role.LEADER, "one follower and the leader are a majority"
    core.tick(5000 + 2 * timeout)
    effects = drain(core)
    assert role(core) is Role.RESIGNED
    assert {s.dest for s in sent(effects, EndQuorumEpochRequest)} == {2, 3}


def test_graceful_resignation_makes_the_best_placed_follower_stand_first() -> None:
    core = make(epoch=1)
    elect(core)
    core.receive(2, fetch(2, 1, 2, 2), 5001)
    core.receive(3, fetch(3, 0, 0, 2), 5001)
    drain(core)
    core.resign(5002)
    request = sent(drain(core), EndQuorumEpochRequest)[0].message
    assert isinstance(request, EndQuorumEpochRequest)
    assert request.preferred_successors == (2, 3)

    follower = make(2, epoch=2, leader=1)
    drain(follower)
    follower.receive(1, request, 5003)
    drain(follower, 5003)
    follower.tick(5003)
    assert role(follower) is Role.PROSPECTIVE


def announced(effects: list[Effect]) -> list[tuple[int, int]]:
    return [(e.epoch, e.leader_id) for e in effects if isinstance(e, LeaderChange)]


def test_a_leader_cut_off_from_the_quorum_stops_reporting_itself_as_leader() -> None:
    """Check-quorum makes it Resigned, its election timeout Prospective: in neither may it tell
    its host that it leads (the host would answer commands from a stale image)."""
    timeout = RaftConfig().fetch_timeout_ms
    core = make(epoch=1)
    assert announced(elect(core, now=5000)) == [(2, 1)]
    assert core.current_leader_id == 1
    core.tick(5000 + timeout)
    effects = drain(core, 5000 + timeout)
    assert role(core) is Role.RESIGNED
    assert announced(effects) == [(2, -1)]
    assert core.current_leader_id == -1
    assert core.leader_id == 1, "its quorum state still records it as the epoch's leader"
    core.tick(core.next_deadline())
    effects = drain(core, core.next_deadline())
    assert role(core) is Role.PROSPECTIVE
    assert announced(effects) == []
    assert core.current_leader_id == -1


def test_a_graceful_resignation_reports_no_leader() -> None:
    core = make(epoch=1)
    elect(core)
    core.resign(5001)
    assert announced(drain(core, 5001)) == [(2, -1)]
    assert core.current_leader_id == -1


def test_a_restarted_leader_reports_no_leader() -> None:
    core = make(epoch=4, leader=1, voted=1)
    assert announced(drain(core)) == [(4, -1)]
    assert core.current_leader_id == -1


def test_a_follower_standing_keeps_reporting_the_leader_it_lost_touch_with() -> None:
    core = make(epoch=3, leader=2)
    assert announced(drain(core)) == [(3, 2)]
    core.tick(RaftConfig().fetch_timeout_ms)
    assert role(core) is Role.PROSPECTIVE
    assert announced(drain(core, 2000)) == []
    assert core.current_leader_id == 2


def test_a_restarted_leader_resigns_its_epoch() -> None:
    core = make(epoch=4, leader=1, voted=1)
    assert role(core) is Role.RESIGNED


def test_an_observer_finds_the_leader_through_any_voter() -> None:
    observer = make(9, epoch=0)
    request = reply_of(drain(observer), FetchRequest)
    assert isinstance(request, FetchRequest)
    assert request.replica_id == 9
    voter = make(2, epoch=4, leader=3)
    drain(voter)
    voter.receive(9, request, 5)
    answer = reply_of(drain(voter, 5), FetchResponse)
    assert isinstance(answer, FetchResponse)
    assert answer.error == ErrorCode.UNKNOWN_LEADER_EPOCH or answer.leader_id == 3
    observer.receive(2, answer, 6)
    effects = drain(observer, 6)
    assert role(observer) is Role.FOLLOWER
    assert observer.leader_id == 3
    assert [s.dest for s in sent(effects, FetchRequest)] == [3]


def test_the_quorum_state_must_match_the_configured_voters() -> None:
    stored = RecoveredState(QuorumState(1, -1, -1, frozenset({1, 2, 3})))
    with pytest.raises(ValueError, match=r"controller\.quorum\.voters"):
        RaftCore(1, frozenset({1, 2}), stored, random.Random(0), 0)


# --- snapshots ------------------------------------------------------------------------------


def test_a_follower_behind_the_log_start_fetches_the_snapshot() -> None:
    config = RaftConfig(snapshot_chunk_bytes=4)
    leader = make(
        epoch=1,
        entries=[(10, 1), (11, 1)],
        snapshot=SnapshotId(10, 1),
        snapshot_data=b"0123456789",
        config=config,
    )
    elect(leader)
    follower = make(2, epoch=2, leader=1, config=config)
    request = reply_of(drain(follower), FetchRequest)
    for _ in range(10):
        leader.receive(2, request, 5001)
        answer = reply_of(drain(leader, 5001), FetchResponse | FetchSnapshotResponse)  # type: ignore[arg-type]
        follower.receive(1, answer, 5001)
        effects = drain(follower, 5001)
        if any(isinstance(e, SnapshotLoaded) for e in effects):
            break
        request = next(s.message for s in effects if isinstance(s, Send))
        assert isinstance(request, FetchRequest | FetchSnapshotRequest)
    installed = [e for e in effects if isinstance(e, InstallSnapshot)]
    assert installed == [InstallSnapshot(installed[0].seq, SnapshotId(10, 1), b"0123456789", True)]
    assert follower.high_watermark == 10
    after = reply_of(effects, FetchRequest)
    assert isinstance(after, FetchRequest)
    assert (after.fetch_offset, after.last_fetched_epoch) == (10, 1)


def test_a_snapshot_covers_only_committed_offsets_and_cuts_the_log() -> None:
    core = make(epoch=1)
    elect(core)
    core.propose([b"a", b"b", b"c"], 5001)
    drain(core, 5001)
    with pytest.raises(ValueError, match="within"):
        core.snapshot(3, b"state")
    core.receive(2, fetch(2, 4, 2, 2), 5002)
    drain(core, 5002)
    assert core.high_watermark == 4
    snapshot = core.snapshot(3, b"state")
    assert snapshot == SnapshotId(3, 2)
    assert core.log.start_offset == 3
    core.receive(3, fetch(3, 1, 2, 2), 5003)
    answer = reply_of(drain(core, 5003), FetchResponse)
    assert isinstance(answer, FetchResponse)
    assert answer.snapshot_id == SnapshotId(3, 2)


def test_a_fetch_position_in_an_epoch_the_leader_never_had_diverges() -> None:
    """The follower's entry at 2 is from epoch 2, which the leader's log skips."""
    leader = make(epoch=2, entries=[(0, 1), (1, 1), (2, 1)])
    elect(leader)  # epoch 3, its entry at 3
    leader.receive(2, fetch(2, 3, 2, 3), 5001)
    answer = reply_of(drain(leader, 5001), FetchResponse)
    assert isinstance(answer, FetchResponse)
    assert answer.diverging == SnapshotId(3, 1)
    assert not answer.entries

    follower = make(2, epoch=3, leader=1, entries=[(0, 1), (1, 1), (2, 2)])
    request = reply_of(drain(follower), FetchRequest)
    follower.receive(1, FetchResponse(request.request_id, 0, 3, 1, 0, 0, (), SnapshotId(3, 1)), 10)
    effects = drain(follower, 10)
    assert [e.offset for e in effects if isinstance(e, TruncateTo)] == [2]


def test_a_follower_whose_every_entry_is_newer_than_the_divergence_truncates_them_all() -> None:
    """Found by simulation seed 103100: entries of epoch 3 where the leader has epoch 1."""
    follower = make(2, epoch=7, leader=5, entries=[(0, 3), (1, 3)])
    request = reply_of(drain(follower), FetchRequest)
    follower.receive(5, FetchResponse(request.request_id, 0, 7, 5, 0, 0, (), SnapshotId(2, 1)), 10)
    effects = drain(follower, 10)
    assert [e.offset for e in effects if isinstance(e, TruncateTo)] == [0]
    again = reply_of(effects, FetchRequest)
    assert isinstance(again, FetchRequest)
    assert (again.fetch_offset, again.last_fetched_epoch) == (0, 0)


# --- writes the store refuses ---------------------------------------------------------------


def test_a_leaders_appends_the_store_refused_are_dropped_and_never_sent() -> None:
    core = make(epoch=1)
    elect(core)
    core.receive(2, fetch(2, 1, 2, 2), 5001)
    drain(core, 5001)
    assert core.high_watermark == 1
    assert core.propose([b"a", b"b"], 5002) == 1
    failed = [e for e in core.take_effects() if isinstance(e, AppendEntries)]
    core.receive(2, fetch(2, 1, 2, 2), 5003)  # parked, then answered once 1-2 are durable
    assert core.propose([b"c"], 5004) == 3
    core.take_effects()  # the driver drops the writes after the refused one too
    assert core.writes_failed(failed[0].seq)
    assert core.log.end_offset == 1
    core.receive(2, fetch(2, 1, 2, 2), 5005)
    effects = drain(core, 5005)
    assert all(
        not (isinstance(e, Send) and isinstance(e.message, FetchResponse) and e.message.entries)
        for e in effects
    ), "nothing of the dropped entries reaches a follower"
    assert core.propose([b"d"], 5006) == 1  # the next proposal takes their place
    drain(core, 5006)
    core.receive(2, fetch(2, 2, 2, 2), 5007)
    drain(core, 5007)
    assert core.high_watermark == 2
    assert core.log.entry(1) == Entry(1, 2, b"d")


def test_entries_that_take_the_place_of_dropped_ones_are_sent_not_the_dropped_ones() -> None:
    """Found by simulation seed 661: the leader's fetch answers were cached by range (first
    offset, log end, last epoch); after its disk refused a command's entries, a retry of the
    command took the same offsets in the same epoch, and followers were sent the dropped
    entries while the leader held the new ones: two logs, one epoch."""
    core = make(epoch=1)
    elect(core)
    core.receive(2, fetch(2, 1, 2, 2), 5001)
    drain(core, 5001)
    core.receive(2, FetchRequest(2001, 2, 2, 1, 2, 500), 5002)  # parked at the log end
    assert not core.take_effects()
    assert core.propose([b"a", b"b"], 5003) == 1  # answers it, held until a and b are durable
    failed = [e for e in core.take_effects() if isinstance(e, AppendEntries)]
    assert core.writes_failed(failed[0].seq)
    assert core.propose([b"c", b"d"], 5004) == 1  # the same offsets, the same epoch
    drain(core, 5004)
    core.receive(2, fetch(2, 1, 2, 2), 5005)
    answer = reply_of(drain(core, 5005), FetchResponse)
    assert isinstance(answer, FetchResponse)
    assert [e.data for e in answer.entries] == [b"c", b"d"]


def test_a_refused_write_the_core_cannot_do_without_stops_it() -> None:
    follower = make(2, epoch=3, leader=1)
    request = reply_of(drain(follower), FetchRequest)
    follower.receive(1, FetchResponse(request.request_id, 0, 3, 1, 0, 0, (Entry(0, 3, b"x"),)), 10)
    writes = [e for e in follower.take_effects() if isinstance(e, AppendEntries)]
    assert writes
    assert not follower.writes_failed(writes[0].seq), "only a leader drops its own entries"

    leader = make(epoch=1)
    drain(leader)
    leader.tick(5000)
    drain(leader, 5000)
    leader.receive(2, VoteResponse(0, 0, leader.epoch, -1, True, True), 5000)
    drain(leader, 5000)
    leader.receive(2, VoteResponse(0, 0, leader.epoch, -1, True, False), 5000)
    assert role(leader) is Role.LEADER
    control = [e for e in leader.take_effects() if isinstance(e, AppendEntries)]
    assert not leader.writes_failed(control[0].seq), "its epoch's first entry is not durable"
