"""The roles of a Raft replica, one state object each (the shape of Kafka's `EpochState` family).

A replica is always in exactly one state. Each state holds what the replica knows in its epoch
(the epoch, the leader it would name in a response, whom it voted for) and what only that role
waits for or counts: its timers, the votes it gathered, the fetch it has in flight, the
followers' progress. Leaving a role drops its state object whole, so nothing of one role leaks
into the next. `RaftCore` (`strom.coordinator.raft.core`) handles the messages and makes the
transitions; the states answer the questions whose answer depends on the role.

    EpochState
    ├── LeaderState           leads its epoch: followers' progress, parked fetches, check-quorum
    ├── FollowerState         fetches from the known leader of its epoch
    └── ElectionTimeoutState  ends when its election timeout expires
        ├── UnattachedState   epoch known, no leader: a voter that voted in the epoch is "Voted"
        │                     (Kafka's unattached state with a voted key); an observer fetches
        │                     from any voter to find the leader instead of standing
        ├── ResignedState     a former leader of this epoch, waiting for the next one
        └── NomineeState      asking the voters
            ├── ProspectiveState  pre-vote (KIP-996): could it win, without bumping the epoch?
            └── CandidateState    bumped the epoch and voted for itself

Observers are only ever Unattached or Follower; they never vote.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, field

from strom.coordinator.raft.messages import NO_LEADER, FetchRequest
from strom.storage.raft.raft_store import SnapshotId

NEVER = 1 << 62
"""A deadline that never comes (a timer that is not running)."""


class Role(enum.Enum):
    UNATTACHED = "Unattached"
    VOTED = "Voted"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


@dataclass(slots=True, eq=False)
class EpochState:
    """What a replica knows in its epoch; subclasses add what their role waits for."""

    epoch: int
    leader_id: int
    """The leader of this epoch as the replica names it in its responses (NO_LEADER: unknown).
    A Resigned replica, and a Prospective or Candidate one that resigned, still name themselves,
    as Kafka's do: it is what their quorum-state file records."""
    voted_id: int
    """The candidate this replica voted for in this epoch (NO_LEADER: none)."""

    @property
    def role(self) -> Role:
        raise NotImplementedError

    def is_leading(self) -> bool:
        """This replica leads its epoch now (not merely named as the epoch's leader)."""
        return False

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool) -> bool:
        """Whether a real vote in this epoch may go to `candidate_id` (whose log is as fresh as
        this replica's if `log_up_to_date`): only while no leader is known and no other
        candidate has this replica's vote."""
        return False

    def hears_from_leader(self, now: int, fetch_timeout_ms: int) -> bool:
        """The epoch's leader is alive as far as this replica knows (leading, or fetched from
        successfully within the fetch timeout): pre-votes are refused (KIP-996)."""
        return False

    def fetching(self) -> FetchProgress | None:
        """The fetch loop this role runs (followers and observers looking for the leader)."""
        return None

    def deadline(self, *, request_timeout_ms: int, fetch_timeout_ms: int) -> int:
        """When the replica must next be ticked in this role."""
        return NEVER


@dataclass(slots=True, eq=False)
class FetchProgress:
    """The one Fetch (or FetchSnapshot) a fetching replica has in flight, or when it sends the
    next one."""

    inflight: int | None = None
    """The request id of the fetch awaiting its response."""
    sent_at: int = 0
    retry_at: int = NEVER

    def deadline(self, request_timeout_ms: int) -> int:
        if self.inflight is not None:
            return self.sent_at + request_timeout_ms
        return self.retry_at


# --- the leader -------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class ReplicaState:
    """The leader's view of one fetching replica in its epoch."""

    offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    told_high_watermark: int = -1
    """The high watermark in the last fetch response it was sent: a fetch from a replica that
    knows an older one is answered at once, not held (it learns of commits without waiting)."""


@dataclass(slots=True, eq=False)
class ParkedFetch:
    """A fetch with nothing new, held until data arrives or `deadline` (the long poll)."""

    src: int
    request: FetchRequest
    deadline: int


@dataclass(slots=True, eq=False)
class LeaderState(EpochState):
    @property
    def role(self) -> Role:
        return Role.LEADER

    epoch_start_offset: int
    """Where this epoch's first entry (the leader's control entry) sits: the high watermark only
    moves past it, so older epochs' entries commit only together with one of this epoch."""
    replicas: dict[int, ReplicaState]
    """Every other voter's progress."""
    observers: dict[int, ReplicaState] = field(default_factory=dict)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    """Held fetches, by replica id (a newer fetch from the same replica supersedes its own);
    change it only through `park` and `unpark`, which keep `_expiries` with it."""
    _expiries: list[tuple[int, int, ParkedFetch]] = field(
        default_factory=list, init=False, repr=False
    )
    """A heap of (deadline, sequence, fetch) over `parked`, with entries of fetches since
    answered left in until they reach the top: with hundreds of observers parked, the next
    deadline and the expired fetches are found without a scan of them all (the driver asks
    for the deadline after every input)."""
    _parked_seq: int = field(default=0, init=False, repr=False)
    begin_unacked: set[int] = field(default_factory=set)
    """Voters that have not acknowledged BeginQuorumEpoch nor fetched in this epoch."""
    begin_retry_at: int = NEVER

    def is_leading(self) -> bool:
        return True

    def hears_from_leader(self, now: int, fetch_timeout_ms: int) -> bool:
        return True

    def majority(self) -> int:
        return (len(self.replicas) + 1) // 2 + 1

    def replica(self, replica_id: int) -> ReplicaState:
        """The progress of a fetching voter, or of an observer (tracked from its first fetch)."""
        found = self.replicas.get(replica_id)
        if found is None:
            found = self.observers.setdefault(replica_id, ReplicaState())
        return found

    def known_replica(self, replica_id: int) -> ReplicaState | None:
        return self.replicas.get(replica_id) or self.observers.get(replica_id)

    def majority_offset(self, own_durable_end: int) -> int:
        """The largest offset a majority of voters (this one by its durable end) has reached."""
        offsets = sorted(
            [own_durable_end, *(r.offset for r in self.replicas.values())], reverse=True
        )
        return offsets[self.majority() - 1]

    def check_quorum_deadline(self, fetch_timeout_ms: int) -> int:
        """When the leader resigns unless more voters fetch: a majority (itself included) must
        have fetched within the fetch timeout."""
        if not self.replicas:
            return NEVER
        times = sorted((r.last_fetch_ms for r in self.replicas.values()), reverse=True)
        return times[self.majority() - 2] + fetch_timeout_ms

    def successors(self) -> tuple[int, ...]:
        """The other voters, furthest fetched first (EndQuorumEpoch's preferred successors)."""
        return tuple(sorted(self.replicas, key=lambda v: -self.replicas[v].offset))

    def park(self, replica_id: int, fetch: ParkedFetch) -> None:
        """Hold `fetch` (superseding the replica's earlier one) until data or its deadline."""
        self.parked[replica_id] = fetch
        self._parked_seq += 1
        heapq.heappush(self._expiries, (fetch.deadline, self._parked_seq, fetch))
        if len(self._expiries) > 2 * len(self.parked) + 64:  # mostly answered ones: rebuild
            self._expiries = [e for e in self._expiries if self._holds(e[2])]
            heapq.heapify(self._expiries)

    def unpark(self, replica_id: int) -> ParkedFetch | None:
        """Release the replica's held fetch, if any (its heap entry goes stale)."""
        return self.parked.pop(replica_id, None)

    def _holds(self, fetch: ParkedFetch) -> bool:
        return self.parked.get(fetch.request.replica_id) is fetch

    def _drop_stale(self) -> None:
        expiries = self._expiries
        while expiries and not self._holds(expiries[0][2]):
            heapq.heappop(expiries)

    def expired(self, now: int) -> list[tuple[int, ParkedFetch]]:
        """Release and return the held fetches whose deadline is `now` or earlier, earliest
        first."""
        out: list[tuple[int, ParkedFetch]] = []
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            fetch = heapq.heappop(expiries)[2]
            if self._holds(fetch):
                replica_id = fetch.request.replica_id
                del self.parked[replica_id]
                out.append((replica_id, fetch))
        return out

    def deadline(self, *, request_timeout_ms: int, fetch_timeout_ms: int) -> int:
        deadline = min(self.begin_retry_at, self.check_quorum_deadline(fetch_timeout_ms))
        self._drop_stale()
        if self._expiries:
            deadline = min(deadline, self._expiries[0][0])
        return deadline


# --- the follower -----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class FollowerState(EpochState):
    @property
    def role(self) -> Role:
        return Role.FOLLOWER

    fetch_deadline: int
    """Without a successful fetch by then, a voter stands (pre-vote) and an observer forgets
    the leader."""
    last_leader_contact: int = -NEVER
    progress: FetchProgress = field(default_factory=FetchProgress)
    snapshot_fetch: tuple[SnapshotId, bytearray] | None = None
    """The snapshot being fetched (FetchSnapshot replaces Fetch until it is whole)."""

    def hears_from_leader(self, now: int, fetch_timeout_ms: int) -> bool:
        return now - self.last_leader_contact < fetch_timeout_ms

    def fetching(self) -> FetchProgress:
        return self.progress

    def deadline(self, *, request_timeout_ms: int, fetch_timeout_ms: int) -> int:
        return min(self.fetch_deadline, self.progress.deadline(request_timeout_ms))


# --- the states that end at an election timeout ------------------------------------------------


@dataclass(slots=True, eq=False)
class ElectionTimeoutState(EpochState):
    election_deadline: int
    """When a voter in this state stands for election (NEVER for an observer)."""

    def deadline(self, *, request_timeout_ms: int, fetch_timeout_ms: int) -> int:
        return self.election_deadline


@dataclass(slots=True, eq=False)
class UnattachedState(ElectionTimeoutState):
    """No leader known in this epoch. Kafka's voted variant is this state with `voted_id` set;
    an observer (`observer` set) has no election timer and fetches from any voter instead."""

    observer: FetchProgress | None = None
    """An observer's fetch loop (None for a voter)."""

    @property
    def role(self) -> Role:
        if self.voted_id != NO_LEADER and self.observer is None:
            return Role.VOTED
        return Role.UNATTACHED

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool) -> bool:
        return self.voted_id in (NO_LEADER, candidate_id) and log_up_to_date

    def fetching(self) -> FetchProgress | None:
        return self.observer

    def deadline(self, *, request_timeout_ms: int, fetch_timeout_ms: int) -> int:
        if self.observer is None:
            return self.election_deadline
        return min(self.election_deadline, self.observer.deadline(request_timeout_ms))


@dataclass(slots=True, eq=False)
class ResignedState(ElectionTimeoutState):
    """A leader that gave up its epoch (check-quorum failed, a clean shutdown, a restart): it
    accepts no writes and votes for nobody in this epoch, and stands at its election timeout."""

    @property
    def role(self) -> Role:
        return Role.RESIGNED


@dataclass(slots=True, eq=False)
class NomineeState(ElectionTimeoutState):
    """Asking every voter for its (pre-)vote; a majority granting wins the round."""

    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


@dataclass(slots=True, eq=False)
class ProspectiveState(NomineeState):
    """A pre-vote (KIP-996) in the current epoch: nothing is persisted. `leader_id` keeps the
    leader this replica lost touch with, to rejoin it if the pre-vote is lost."""

    @property
    def role(self) -> Role:
        return Role.PROSPECTIVE

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool) -> bool:
        return (
            self.leader_id == NO_LEADER
            and self.voted_id in (NO_LEADER, candidate_id)
            and log_up_to_date
        )


@dataclass(slots=True, eq=False)
class CandidateState(NomineeState):
    """Bumped the epoch and voted for itself; a majority of votes makes it the leader."""

    @property
    def role(self) -> Role:
        return Role.CANDIDATE
