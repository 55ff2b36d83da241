"""The KRaft consensus core: a pure state machine, no clock, no I/O.

Inputs: `receive(src, message, now)`, `tick(now)`, `writes_durable(seq, now)`, and from the local
state machine `propose`, `snapshot`, `resign`. Randomness comes from the injected
`random.Random`. Outputs: `take_effects()` (see `strom.coordinator.raft.effects`) and
`next_deadline()`, the time the driver must call `tick` by.

Roles, as in Kafka's KafkaRaftClient, are state objects (`strom.coordinator.raft.states`):
Unattached (epoch known, no leader; Voted when it voted in this epoch), Prospective (pre-vote,
KIP-996: asks whether it could win without bumping the epoch), Candidate (bumped the epoch, voted
for itself), Leader, Follower (fetching from the known leader), Resigned (a former leader of this
epoch waiting for the next one). The core handles every message and makes every transition; the
state holds what its role counts and waits for. Observers (`node_id` not in `voters`) are only
Unattached or Follower and never vote.

Replication is pull-based: followers and observers send Fetch(fetch offset, last fetched epoch);
the leader checks the pair against its own log and answers with entries, with the diverging epoch
and end offset (the follower truncates to where the logs agree), or with the snapshot id to fetch
when the offset is below its log start. The leader's high watermark is the offset a majority of
voters have durably reached, and only moves once that offset lies in the leader's own epoch (past
the control entry it writes when elected). A leader that has not heard a fetch from a majority for
`fetch_timeout_ms` resigns (check-quorum); a follower that has not fetched successfully for as long
starts a pre-vote.

Durability: a `Send` is only released after every write issued before it is acknowledged by
`writes_durable`, so votes, epochs and fetch positions are never acted on before they are on disk.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

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
    Write,
)
from strom.coordinator.raft.log import ReplicaLog
from strom.coordinator.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from strom.coordinator.raft.states import (
    NEVER,
    CandidateState,
    ElectionTimeoutState,
    EpochState,
    FetchProgress,
    FollowerState,
    LeaderState,
    NomineeState,
    ParkedFetch,
    ProspectiveState,
    ReplicaState,
    ResignedState,
    Role,
    UnattachedState,
)
from strom.storage.raft.raft_store import Entry, QuorumState, RecoveredState, SnapshotId
from strom.wire.errors import ErrorCode

NONE = int(ErrorCode.NONE)
FENCED_LEADER_EPOCH = int(ErrorCode.FENCED_LEADER_EPOCH)
UNKNOWN_LEADER_EPOCH = int(ErrorCode.UNKNOWN_LEADER_EPOCH)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
SNAPSHOT_NOT_FOUND = int(ErrorCode.SNAPSHOT_NOT_FOUND)
POSITION_OUT_OF_RANGE = int(ErrorCode.POSITION_OUT_OF_RANGE)
INCONSISTENT_VOTER_SET = int(ErrorCode.INCONSISTENT_VOTER_SET)


class RaftSafetyError(Exception):
    """An input that could only arrive if Raft's safety were already broken (two leaders in one
    epoch, truncating committed entries). The node must stop rather than continue."""


class PlantedBug(enum.Enum):
    """A rule of Raft the core can be told to break (`RaftConfig.planted_bugs`, tests only)."""

    COMMIT_WITHOUT_OWN_EPOCH = "commit-without-own-epoch"
    """The high watermark moves as soon as a majority holds an offset, even before the leader's
    own epoch is in it (the Raft paper's Figure 8: an older epoch's entry held by a majority can
    still be overwritten)."""
    VOTE_FOR_STALE_LOG = "vote-for-stale-log"
    """Votes are granted whatever the candidate's log (the election restriction dropped)."""
    LEAD_WITHOUT_VOTE = "lead-without-vote"
    """A won pre-vote leads at once, without bumping the epoch and a real vote."""
    SEND_BEFORE_DURABLE = "send-before-durable"
    """Messages leave before the writes issued ahead of them are durable (a vote or a fetch
    position announced, then lost in a crash)."""
    FOLLOWER_TRUSTS_HIGH_WATERMARK = "follower-trusts-high-watermark"
    """A follower takes the leader's high watermark even from a response that did not accept
    its fetch position (it may hold other entries below it)."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's `controller.quorum.*` settings, with its defaults."""

    election_timeout_ms: int = 1000
    """controller.quorum.election.timeout.ms; the timeout is drawn from [t, 2t)."""
    fetch_timeout_ms: int = 2000
    """controller.quorum.fetch.timeout.ms"""
    election_backoff_max_ms: int = 1000
    """controller.quorum.election.backoff.max.ms"""
    request_timeout_ms: int = 2000
    """controller.quorum.request.timeout.ms"""
    retry_backoff_ms: int = 20
    """controller.quorum.retry.backoff.ms"""
    fetch_max_wait_ms: int = 500
    """How long the leader holds a fetch that has nothing new (Kafka's fetchMaxWaitMs)."""
    fetch_max_bytes: int = 1 << 20
    snapshot_chunk_bytes: int = 1 << 20
    planted_bugs: frozenset[PlantedBug] = frozenset()
    """Test-only: known Raft bugs switched back on, so that a test can show the simulator
    catches each one (`tests/raft/test_simulation.py`). Always empty outside those tests."""


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    replica_id: int
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """What DescribeQuorum reports (filled in on the leader only)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaInfo, ...]
    observers: tuple[ReplicaInfo, ...]


class RaftCore:
    """One replica of the metadata partition. See the module docstring."""

    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        recovered: RecoveredState,
        rng: random.Random,
        now: int,
        config: RaftConfig | None = None,
    ) -> None:
        if not voters:
            raise ValueError("the quorum needs at least one voter")
        stored = recovered.quorum.voters
        if stored and stored != voters:
            raise ValueError(
                f"the quorum-state file lists voters {sorted(stored)} but the configuration "
                f"says {sorted(voters)}: fix controller.quorum.voters or reformat this node"
            )
        self.node_id = node_id
        self.voters = voters
        self.is_voter = node_id in voters
        self.config = config or RaftConfig()
        self._rng = rng
        self.log = ReplicaLog(recovered)
        self.high_watermark = self.log.start_offset
        self._persisted = recovered.quorum
        self._effects: list[Effect] = []
        self._seq = 0
        self._durable_seq = 0
        self._held: list[tuple[int, Send]] = []
        self._log_writes: list[tuple[int, int]] = []
        self._durable_end = self.log.end_offset
        self._next_request_id = rng.getrandbits(24)
        self._announced: tuple[int, int] | None = None

        epoch, leader_id, voted_id = (
            recovered.quorum.leader_epoch,
            recovered.quorum.leader_id,
            recovered.quorum.voted_id,
        )
        self.state: EpochState
        if leader_id == node_id:
            # a leader that restarts cannot know what it had appended: it resigns the epoch
            self.state = ResignedState(epoch, leader_id, voted_id, self._election_deadline(now))
        elif leader_id != NO_LEADER:
            self.state = FollowerState(
                epoch,
                leader_id,
                voted_id,
                fetch_deadline=now + self.config.fetch_timeout_ms,
                progress=FetchProgress(retry_at=now),
            )
        else:
            self.state = self._unattached(epoch, voted_id, now)
        self._announce()
        if self.voters == {node_id}:
            # the only voter needs nobody's vote: lead at once, as Kafka does
            self._become_prospective(now)
        self.tick(now)

    # --- what the state says ----------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        """The leader of this epoch as this node names it in its responses (see
        `EpochState.leader_id`)."""
        return self.state.leader_id

    @property
    def voted_id(self) -> int:
        return self.state.voted_id

    @property
    def current_leader_id(self) -> int:
        """The leader this node reports to its host (`LeaderChange`): the epoch's leader, but
        never itself unless it leads now. A former leader (Resigned, then Prospective or
        Candidate after its election timeout) still names itself in its responses, as its
        quorum-state file does, yet must not tell its host that it leads: the host would go on
        answering commands from an image the rest of the quorum may have moved past."""
        leader = self.state.leader_id
        if leader == self.node_id and not self.state.is_leading():
            return NO_LEADER
        return leader

    # --- inputs -----------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        """Fire every timer due at `now`."""
        state = self.state
        if isinstance(state, LeaderState):
            self._tick_leader(state, now)
            return
        if isinstance(state, ElectionTimeoutState) and now >= state.election_deadline:
            if self.is_voter:
                self._become_prospective(now)
            else:
                state.election_deadline = NEVER
        state = self.state
        if isinstance(state, FollowerState) and now >= state.fetch_deadline:
            if self.is_voter:
                self._become_prospective(now)
            else:
                self._become_unattached(state.epoch, now)
        progress = self.state.fetching()
        if progress is not None:
            if progress.inflight is not None:
                if now >= progress.sent_at + self.config.request_timeout_ms:
                    progress.inflight = None
                    self._send_fetch(now)
            elif now >= progress.retry_at:
                self._send_fetch(now)

    def next_deadline(self) -> int:
        """The earliest time `tick` has something to do."""
        return self.state.deadline(
            request_timeout_ms=self.config.request_timeout_ms,
            fetch_timeout_ms=self.config.fetch_timeout_ms,
        )

    def writes_durable(self, seq: int, now: int) -> None:
        """Every write with `seq` or lower is durable: release what waited on it."""
        if seq <= self._durable_seq:
            return
        self._durable_seq = seq
        while self._log_writes and self._log_writes[0][0] <= seq:
            self._durable_end = self._log_writes.pop(0)[1]
        if self._held:
            still: list[tuple[int, Send]] = []
            for needed, send in self._held:
                if needed <= seq:
                    self._effects.append(send)
                else:
                    still.append((needed, send))
            self._held = still
        if isinstance(self.state, LeaderState):
            self._advance_high_watermark(self.state, now)

    def writes_failed(self, seq: int) -> bool:
        """The store could not perform write `seq` and performed none after it; each of them
        was an `AppendEntries`, and the store is as it was before `seq` (a failed append is
        cut back). True when the core carries on without them: a leader whose epoch's first
        entry is durable drops the entries from its log (none was sent: a send waits until the
        writes before it are durable, so no replica has them and none is committed), and the
        sends that waited on them (the peers retry). False: the replica cannot go on, and the
        driver must stop it (a restart recovers from the store)."""
        state = self.state
        if not isinstance(state, LeaderState) or seq <= self._durable_seq:
            return False
        keep = self._durable_end
        if keep <= state.epoch_start_offset or keep < self.log.start_offset:
            return False
        self.log.truncate_to(keep)
        self._log_writes = [(s, end) for s, end in self._log_writes if s < seq]
        self._held = [(needed, send) for needed, send in self._held if needed < seq]
        self._effects = [
            e for e in self._effects if not (isinstance(e, AppendEntries) and e.seq >= seq)
        ]
        return True

    def receive(self, src: int, message: RaftMessage, now: int) -> None:
        """Handle one message from node `src`."""
        match message:
            case FetchRequest():
                self._on_fetch_request(src, message, now)
            case FetchResponse():
                self._on_fetch_response(src, message, now)
            case VoteRequest():
                self._on_vote_request(src, message, now)
            case VoteResponse():
                self._on_vote_response(src, message, now)
            case BeginQuorumEpochRequest():
                self._on_begin_epoch_request(src, message, now)
            case BeginQuorumEpochResponse():
                self._on_begin_epoch_response(src, message, now)
            case EndQuorumEpochRequest():
                self._on_end_epoch_request(src, message, now)
            case EndQuorumEpochResponse():
                self._observe(message.epoch, message.leader_id, now)
            case FetchSnapshotRequest():
                self._on_fetch_snapshot_request(src, message, now)
            case FetchSnapshotResponse():
                self._on_fetch_snapshot_response(src, message, now)

    def propose(self, payloads: list[bytes], now: int) -> int | None:
        """Append entries as leader; returns the offset of the first, None if not the leader."""
        state = self.state
        if not isinstance(state, LeaderState) or not payloads:
            return None
        first = self.log.end_offset
        entries = tuple(
            Entry(first + i, state.epoch, payload) for i, payload in enumerate(payloads)
        )
        self._append(entries)
        self._answer_parked(state, now, only_new_data=True)
        return first

    def snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """Record a snapshot of the state machine up to (not including) `end_offset`.

        Only committed offsets can be snapshotted; the log below it is dropped.
        """
        if not self.log.start_offset < end_offset <= self.high_watermark:
            raise ValueError(
                f"a snapshot must end within ({self.log.start_offset}, {self.high_watermark}]"
            )
        epoch = self.log.epoch_at(end_offset - 1)
        assert epoch is not None
        snapshot_id = SnapshotId(end_offset, epoch)
        reset = self.log.install_snapshot(snapshot_id, data)
        self._write(InstallSnapshot(self._next_seq(), snapshot_id, data, reset))
        return snapshot_id

    def resign(self, now: int) -> None:
        """Step down gracefully (shutdown): tell the voters, best-placed successor first."""
        state = self.state
        if isinstance(state, LeaderState):
            self._become_resigned(now, state.successors())

    def take_effects(self) -> list[Effect]:
        effects, self._effects = self._effects, []
        return effects

    def describe(self, now: int) -> QuorumInfo:
        def info(replica_id: int, replica: ReplicaState) -> ReplicaInfo:
            return ReplicaInfo(
                replica_id, replica.offset, replica.last_fetch_ms, replica.last_caught_up_ms
            )

        voters: list[ReplicaInfo] = []
        observers: list[ReplicaInfo] = []
        state = self.state
        if isinstance(state, LeaderState):
            for voter in sorted(self.voters):
                if voter == self.node_id:
                    voters.append(ReplicaInfo(voter, self._durable_end, now, now))
                else:
                    voters.append(info(voter, state.replicas[voter]))
            observers = [info(i, r) for i, r in sorted(state.observers.items())]
        return QuorumInfo(
            self.leader_id, self.epoch, self.high_watermark, tuple(voters), tuple(observers)
        )

    # --- plumbing -----------------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _write(self, write: Write) -> None:
        self._effects.append(write)
        if isinstance(write, AppendEntries | TruncateTo | InstallSnapshot):
            self._log_writes.append((write.seq, self.log.end_offset))

    def _send(self, dest: int, message: RaftMessage) -> None:
        send = Send(dest, message)
        if self._seq > self._durable_seq and not self._planted(PlantedBug.SEND_BEFORE_DURABLE):
            self._held.append((self._seq, send))
        else:
            self._effects.append(send)

    def _request_id(self) -> int:
        self._next_request_id = (self._next_request_id + 1) & 0x7FFFFFFF
        return self._next_request_id

    def _persist(self) -> None:
        state = QuorumState(self.epoch, self.leader_id, self.voted_id, self.voters)
        if state != self._persisted:
            self._persisted = state
            self._write(PersistQuorumState(self._next_seq(), state))

    def _announce(self) -> None:
        now_known = (self.epoch, self.current_leader_id)
        if now_known != self._announced:
            self._announced = now_known
            self._effects.append(LeaderChange(*now_known))

    def _append(self, entries: tuple[Entry, ...]) -> None:
        self.log.append(entries)
        self._write(AppendEntries(self._next_seq(), entries))

    def _set_high_watermark(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = offset
            self._effects.append(HighWatermark(offset))

    def _election_deadline(self, now: int) -> int:
        """A fresh election timeout, drawn from [t, 2t)."""
        base = self.config.election_timeout_ms
        return now + base + self._rng.randrange(base)

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        if self._planted(PlantedBug.VOTE_FOR_STALE_LOG):
            return True
        return (last_epoch, end_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _planted(self, bug: PlantedBug) -> bool:
        return bug in self.config.planted_bugs

    # --- transitions --------------------------------------------------------------------------

    def _leave(self, now: int) -> None:
        """End the current role: a leader answers the fetches it holds (it leads no longer)."""
        state = self.state
        if isinstance(state, LeaderState):
            self._answer_parked(state, now, error=NOT_LEADER_OR_FOLLOWER)

    def _unattached(self, epoch: int, voted_id: int, now: int) -> UnattachedState:
        """No leader known in `epoch`: a voter waits out its election timeout, an observer
        fetches from any voter to find the leader."""
        if self.is_voter:
            return UnattachedState(epoch, NO_LEADER, voted_id, self._election_deadline(now))
        return UnattachedState(
            epoch, NO_LEADER, voted_id, NEVER, observer=FetchProgress(retry_at=now)
        )

    def _become_unattached(self, epoch: int, now: int) -> None:
        self._leave(now)
        voted_id = self.voted_id if epoch == self.epoch else NO_LEADER
        self.state = self._unattached(epoch, voted_id, now)
        self._persist()
        self._announce()

    def _become_voted(self, candidate_id: int, now: int) -> None:
        """Vote for `candidate_id` in the current epoch (persisted before the grant is sent)."""
        self._leave(now)
        self.state = UnattachedState(
            self.epoch, NO_LEADER, candidate_id, self._election_deadline(now)
        )
        self._persist()

    def _become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        if leader_id == self.node_id:
            raise RaftSafetyError(f"told that this node leads epoch {epoch}, which it does not")
        if isinstance(self.state, LeaderState) and epoch == self.epoch:
            raise RaftSafetyError(f"node {leader_id} claims epoch {epoch}, led by this node")
        self._leave(now)
        voted_id = self.voted_id if epoch == self.epoch else NO_LEADER
        self.state = FollowerState(
            epoch, leader_id, voted_id, fetch_deadline=now + self.config.fetch_timeout_ms
        )
        self._persist()
        self._announce()
        self._send_fetch(now)

    def _become_prospective(self, now: int) -> None:
        self._leave(now)
        state = ProspectiveState(
            self.epoch, self.leader_id, self.voted_id, self._election_deadline(now)
        )
        state.granted.add(self.node_id)
        self.state = state
        if len(state.granted) >= self._majority():
            self._become_candidate(now)
            return
        self._request_votes(pre_vote=True)

    def _become_candidate(self, now: int) -> None:
        if self._planted(PlantedBug.LEAD_WITHOUT_VOTE):
            self._become_leader(now)
            return
        self._leave(now)
        self.state = state = CandidateState(
            self.epoch + 1, NO_LEADER, self.node_id, self._election_deadline(now)
        )
        state.granted.add(self.node_id)
        self._persist()
        self._announce()
        if len(state.granted) >= self._majority():
            self._become_leader(now)
            return
        self._request_votes(pre_vote=False)

    def _request_votes(self, *, pre_vote: bool) -> None:
        """Ask every other voter for its (pre-)vote in this epoch, on this log."""
        for voter in self.voters:
            if voter != self.node_id:
                self._send(
                    voter,
                    VoteRequest(
                        self._request_id(),
                        self.epoch,
                        self.node_id,
                        self.log.last_epoch,
                        self.log.end_offset,
                        pre_vote=pre_vote,
                    ),
                )

    def _become_leader(self, now: int) -> None:
        self._leave(now)
        self.state = state = LeaderState(
            self.epoch,
            self.node_id,
            self.voted_id,
            epoch_start_offset=self.log.end_offset,
            replicas={v: ReplicaState(last_fetch_ms=now) for v in self.voters if v != self.node_id},
        )
        self._persist()
        self._announce()
        self._append((Entry(self.log.end_offset, self.epoch, b"", control=True),))
        state.begin_unacked = set(state.replicas)
        self._send_begin_epoch(state, now)

    def _become_resigned(self, now: int, successors: tuple[int, ...]) -> None:
        self._leave(now)
        self.state = ResignedState(
            self.epoch, self.leader_id, self.voted_id, self._election_deadline(now)
        )
        self._announce()
        for voter in self.voters:
            if voter != self.node_id:
                self._send(
                    voter,
                    EndQuorumEpochRequest(self._request_id(), self.epoch, self.node_id, successors),
                )

    def _observe(self, epoch: int, leader_id: int, now: int) -> bool:
        """Learn of `epoch` and its leader from any message; True if it moved this node on."""
        if epoch > self.epoch:
            if leader_id not in (NO_LEADER, self.node_id):
                self._become_follower(epoch, leader_id, now)
            else:
                self._become_unattached(epoch, now)
            return True
        if (
            epoch == self.epoch
            and leader_id not in (NO_LEADER, self.node_id)
            and self.leader_id == NO_LEADER
        ):
            if isinstance(self.state, LeaderState):
                raise RaftSafetyError(f"node {leader_id} claims epoch {epoch}, led by this node")
            self._become_follower(epoch, leader_id, now)
            return True
        if (
            epoch == self.epoch
            and leader_id not in (NO_LEADER, self.node_id)
            and (leader_id != self.leader_id)
        ):
            raise RaftSafetyError(f"two leaders in epoch {epoch}: {self.leader_id} and {leader_id}")
        return False

    # --- votes --------------------------------------------------------------------------------

    def _on_vote_request(self, src: int, request: VoteRequest, now: int) -> None:
        def reply(error: int, granted: bool) -> None:
            self._send(
                src,
                VoteResponse(
                    request.request_id,
                    error,
                    self.epoch,
                    self.leader_id,
                    granted,
                    request.pre_vote,
                ),
            )

        if not self.is_voter or request.candidate_id not in self.voters:
            reply(INCONSISTENT_VOTER_SET, False)
            return
        if request.epoch < self.epoch:
            reply(FENCED_LEADER_EPOCH, False)
            return
        log_ok = self._log_up_to_date(request.last_epoch, request.end_offset)
        if request.pre_vote:
            # KIP-996: refuse while this epoch's leader is alive (leading, or recently fetched)
            leader_alive = request.epoch == self.epoch and self.state.hears_from_leader(
                now, self.config.fetch_timeout_ms
            )
            reply(NONE, log_ok and not leader_alive)
            return
        if request.epoch > self.epoch:
            self._become_unattached(request.epoch, now)
        granted = self.state.can_grant_vote(request.candidate_id, log_ok)
        if granted and self.voted_id == NO_LEADER:
            self._become_voted(request.candidate_id, now)
        reply(NONE, granted)

    def _on_vote_response(self, src: int, response: VoteResponse, now: int) -> None:
        if response.error == INCONSISTENT_VOTER_SET:
            return
        if self._observe(response.epoch, response.leader_id, now):
            return
        if response.epoch != self.epoch or src not in self.voters:
            return
        state = self.state
        wanted = ProspectiveState if response.pre_vote else CandidateState
        if not isinstance(state, wanted):
            return
        assert isinstance(state, NomineeState)
        if response.granted:
            state.granted.add(src)
            if len(state.granted) >= self._majority():
                if response.pre_vote:
                    self._become_candidate(now)
                else:
                    self._become_leader(now)
        else:
            state.rejected.add(src)
            if response.pre_vote and len(state.rejected) >= self._majority():
                if state.leader_id not in (NO_LEADER, self.node_id):
                    # the leader this node lost touch with is still there: rejoin it
                    self._become_follower(state.epoch, state.leader_id, now)
                    return
                # lost the pre-vote: back off, then try again
                state.election_deadline = min(
                    state.election_deadline,
                    now + self._rng.randrange(self.config.election_backoff_max_ms + 1),
                )

    # --- leader announcements -----------------------------------------------------------------

    def _on_begin_epoch_request(self, src: int, request: BeginQuorumEpochRequest, now: int) -> None:
        if request.epoch < self.epoch:
            error = FENCED_LEADER_EPOCH
        else:
            error = NONE
            self._observe(request.epoch, request.leader_id, now)
        self._send(
            src, BeginQuorumEpochResponse(request.request_id, error, self.epoch, self.leader_id)
        )

    def _on_begin_epoch_response(
        self, src: int, response: BeginQuorumEpochResponse, now: int
    ) -> None:
        if self._observe(response.epoch, response.leader_id, now):
            return
        state = self.state
        if (
            isinstance(state, LeaderState)
            and response.error == NONE
            and response.epoch == state.epoch
        ):
            state.begin_unacked.discard(src)

    def _send_begin_epoch(self, state: LeaderState, now: int) -> None:
        for voter in sorted(state.begin_unacked):
            self._send(
                voter, BeginQuorumEpochRequest(self._request_id(), state.epoch, self.node_id)
            )
        state.begin_retry_at = (
            now + self.config.request_timeout_ms if state.begin_unacked else NEVER
        )

    def _on_end_epoch_request(self, src: int, request: EndQuorumEpochRequest, now: int) -> None:
        if request.epoch < self.epoch:
            error = FENCED_LEADER_EPOCH
        else:
            error = NONE
            self._observe(request.epoch, request.leader_id, now)
            state = self.state
            if (
                isinstance(state, FollowerState)
                and state.epoch == request.epoch
                and state.leader_id == request.leader_id
            ):
                # the leader is going: stand earlier the better placed this node is
                state.last_leader_contact = -NEVER
                if self.node_id in request.preferred_successors:
                    position = request.preferred_successors.index(self.node_id)
                    backoff = (
                        0
                        if position == 0
                        else min(
                            self.config.election_backoff_max_ms,
                            self.config.retry_backoff_ms << min(position - 1, 16),
                        )
                    )
                else:
                    backoff = self._rng.randrange(self.config.election_backoff_max_ms + 1)
                state.fetch_deadline = min(state.fetch_deadline, now + backoff)
        self._send(
            src, EndQuorumEpochResponse(request.request_id, error, self.epoch, self.leader_id)
        )

    # --- fetching (leader side) ---------------------------------------------------------------

    def _fetch_error(self, request_epoch: int) -> int:
        if request_epoch < self.epoch:
            return FENCED_LEADER_EPOCH
        if request_epoch > self.epoch:
            return UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, LeaderState):
            return NOT_LEADER_OR_FOLLOWER
        return NONE

    def _on_fetch_request(self, src: int, request: FetchRequest, now: int) -> None:
        error = self._fetch_error(request.epoch)
        state = self.state
        if error != NONE or not isinstance(state, LeaderState):
            self._send(src, self._fetch_response(request, error))
            return
        replica = state.replica(request.replica_id)
        replica.last_fetch_ms = now
        state.begin_unacked.discard(request.replica_id)
        state.unpark(request.replica_id)  # superseded: the replica gave up on it
        high_watermark = self.high_watermark
        response = self._serve_fetch(state, request, now)
        if self.high_watermark > high_watermark:
            self._answer_parked(state, now)
        if (
            response.diverging is None
            and response.snapshot_id is None
            and not response.entries
            and request.max_wait_ms > 0
            and replica.told_high_watermark >= self.high_watermark
        ):
            deadline = now + min(request.max_wait_ms, self.config.fetch_max_wait_ms)
            state.park(request.replica_id, ParkedFetch(src, request, deadline))
        else:
            self._send_fetch_response(state, src, request.replica_id, response)

    def _send_fetch_response(
        self, state: LeaderState, src: int, replica_id: int, response: FetchResponse
    ) -> None:
        replica = state.known_replica(replica_id)
        if replica is not None and response.error == NONE:
            replica.told_high_watermark = response.high_watermark
        self._send(src, response)

    def _serve_fetch(self, state: LeaderState, request: FetchRequest, now: int) -> FetchResponse:
        """Validate a fetch position, update the replica's progress, build the answer."""
        log = self.log
        offset = request.fetch_offset
        if offset < log.start_offset and log.snapshot is not None:
            return self._fetch_response(request, NONE, snapshot_id=log.snapshot)
        if offset > 0 or log.start_offset > 0:
            found = log.end_offset_for_epoch(request.last_fetched_epoch)
            if found is None:
                if log.snapshot is not None:
                    return self._fetch_response(request, NONE, snapshot_id=log.snapshot)
                return self._fetch_response(request, NONE, diverging=SnapshotId(0, 0))
            if found.epoch != request.last_fetched_epoch or found.end_offset < offset:
                return self._fetch_response(request, NONE, diverging=found)
        replica = state.replica(request.replica_id)
        replica.offset = offset
        if offset >= log.end_offset:
            replica.last_caught_up_ms = now
        if request.replica_id in state.replicas:
            self._advance_high_watermark(state, now, answer_parked=False)
        entries = (
            log.entries_from(offset, self.config.fetch_max_bytes) if offset < log.end_offset else ()
        )
        return self._fetch_response(request, NONE, entries=entries)

    def _fetch_response(
        self,
        request: FetchRequest,
        error: int,
        *,
        entries: tuple[Entry, ...] = (),
        diverging: SnapshotId | None = None,
        snapshot_id: SnapshotId | None = None,
    ) -> FetchResponse:
        return FetchResponse(
            request.request_id,
            error,
            self.epoch,
            self.leader_id,
            self.high_watermark,
            self.log.start_offset,
            entries,
            diverging,
            snapshot_id,
        )

    def _answer_parked(
        self,
        state: LeaderState,
        now: int,
        *,
        only_new_data: bool = False,
        error: int = NONE,
        due: bool = False,
    ) -> None:
        if due:
            answer = state.expired(now)
        else:
            answer = [
                (replica_id, parked)
                for replica_id, parked in state.parked.items()
                if not (only_new_data and parked.request.fetch_offset >= self.log.end_offset)
            ]
            for replica_id, _ in answer:
                state.unpark(replica_id)
        for replica_id, parked in answer:
            if error != NONE:
                self._send(parked.src, self._fetch_response(parked.request, error))
            else:
                response = self._serve_fetch(state, parked.request, now)
                self._send_fetch_response(state, parked.src, replica_id, response)

    def _advance_high_watermark(
        self, state: LeaderState, now: int, *, answer_parked: bool = True
    ) -> None:
        majority_offset = state.majority_offset(self._durable_end)
        own_epoch = majority_offset > state.epoch_start_offset
        if self._planted(PlantedBug.COMMIT_WITHOUT_OWN_EPOCH):
            own_epoch = True
        if majority_offset > self.high_watermark and own_epoch:
            self._set_high_watermark(majority_offset)
            if answer_parked:
                self._answer_parked(state, now)

    def _tick_leader(self, state: LeaderState, now: int) -> None:
        if now >= state.check_quorum_deadline(self.config.fetch_timeout_ms):
            self._become_resigned(now, ())
            return
        if now >= state.begin_retry_at:
            self._send_begin_epoch(state, now)
        if state.parked:
            self._answer_parked(state, now, due=True)

    def _on_fetch_snapshot_request(self, src: int, request: FetchSnapshotRequest, now: int) -> None:
        error = self._fetch_error(request.epoch)
        snapshot = self.log.snapshot
        size = len(self.log.snapshot_data)
        data = b""
        state = self.state
        if error == NONE and isinstance(state, LeaderState):
            replica = state.replicas.get(request.replica_id)
            if replica is not None:
                replica.last_fetch_ms = now
            if snapshot != request.snapshot_id:
                error = SNAPSHOT_NOT_FOUND
            elif not 0 <= request.position <= size:
                error = POSITION_OUT_OF_RANGE
            else:
                chunk = max(1, min(request.max_bytes, self.config.snapshot_chunk_bytes))
                data = self.log.snapshot_data[request.position : request.position + chunk]
        self._send(
            src,
            FetchSnapshotResponse(
                request.request_id,
                error,
                self.epoch,
                self.leader_id,
                request.snapshot_id,
                size,
                request.position,
                data,
            ),
        )

    # --- fetching (follower and observer side) ------------------------------------------------

    def _send_fetch(self, now: int) -> None:
        """Send the next Fetch (or FetchSnapshot chunk request): a follower to its leader, an
        observer that knows no leader to any voter (whose answer names the leader)."""
        state = self.state
        progress = state.fetching()
        if progress is None:
            return
        if isinstance(state, FollowerState):
            target = state.leader_id
        else:
            target = self._rng.choice(sorted(self.voters))
        request_id = self._request_id()
        progress.inflight, progress.sent_at = request_id, now
        progress.retry_at = NEVER
        if isinstance(state, FollowerState) and state.snapshot_fetch is not None:
            snapshot_id, buffer = state.snapshot_fetch
            self._send(
                target,
                FetchSnapshotRequest(
                    request_id,
                    self.epoch,
                    self.node_id,
                    snapshot_id,
                    len(buffer),
                    self.config.snapshot_chunk_bytes,
                ),
            )
            return
        end = self.log.end_offset
        self._send(
            target,
            FetchRequest(
                request_id,
                self.epoch,
                self.node_id,
                end,
                self.log.last_epoch if end > 0 else 0,
                self.config.fetch_max_wait_ms,
            ),
        )

    def _fetch_failed(self, progress: FetchProgress, now: int) -> None:
        progress.inflight = None
        progress.retry_at = now + self.config.retry_backoff_ms

    def _on_fetch_response(self, src: int, response: FetchResponse, now: int) -> None:
        progress = self.state.fetching()
        if progress is None or response.request_id != progress.inflight:
            return
        if self._observe(response.epoch, response.leader_id, now):
            return
        state = self.state
        if (
            response.error != NONE
            or not isinstance(state, FollowerState)
            or src != state.leader_id
            or response.epoch != state.epoch
        ):
            self._fetch_failed(progress, now)
            return
        progress.inflight = None
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        state.last_leader_contact = now
        if response.diverging is not None:
            if self._planted(PlantedBug.FOLLOWER_TRUSTS_HIGH_WATERMARK):
                self._set_high_watermark(min(response.high_watermark, self.log.end_offset))
            self._truncate_diverging(response.diverging)
        elif response.snapshot_id is not None:
            state.snapshot_fetch = (response.snapshot_id, bytearray())
        else:
            entries = response.entries
            if entries:
                if entries[0].offset != self.log.end_offset:
                    self._fetch_failed(progress, now)
                    return
                self._append(entries)
            # the position was accepted: this log matches the leader's up to its end
            self._set_high_watermark(min(response.high_watermark, self.log.end_offset))
        self._send_fetch(now)

    def _truncate_diverging(self, diverging: SnapshotId) -> None:
        own = self.log.end_offset_for_epoch(diverging.epoch)
        # no epoch this old here: every entry held is newer than the leader's, so all go
        own_end = self.log.start_offset if own is None else own.end_offset
        offset = min(own_end, diverging.end_offset, self.log.end_offset)
        if offset < self.high_watermark or offset < self.log.start_offset:
            raise RaftSafetyError(
                f"the leader's log diverges at {offset}, below this node's high watermark "
                f"{self.high_watermark} or log start {self.log.start_offset}"
            )
        if offset < self.log.end_offset:
            self.log.truncate_to(offset)
            self._write(TruncateTo(self._next_seq(), offset))

    def _on_fetch_snapshot_response(
        self, src: int, response: FetchSnapshotResponse, now: int
    ) -> None:
        state = self.state
        if (
            not isinstance(state, FollowerState)
            or response.request_id != state.progress.inflight
            or state.snapshot_fetch is None
        ):
            return
        if self._observe(response.epoch, response.leader_id, now):
            return
        progress = state.progress
        snapshot_id, buffer = state.snapshot_fetch
        if response.error != NONE or src != state.leader_id or response.epoch != state.epoch:
            if response.error in (SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE):
                state.snapshot_fetch = None  # fetch the log again; it names the new snapshot
            self._fetch_failed(progress, now)
            return
        progress.inflight = None
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        state.last_leader_contact = now
        if response.snapshot_id != snapshot_id or response.position != len(buffer):
            self._fetch_failed(progress, now)
            return
        buffer += response.data
        if len(buffer) >= response.size:
            data = bytes(buffer[: response.size])
            state.snapshot_fetch = None
            if snapshot_id.end_offset > self.log.start_offset:
                reset = self.log.install_snapshot(snapshot_id, data)
                if reset and self.high_watermark > snapshot_id.end_offset:
                    raise RaftSafetyError(
                        f"snapshot {snapshot_id} replaces a log committed up to "
                        f"{self.high_watermark}"
                    )
                self._write(InstallSnapshot(self._next_seq(), snapshot_id, data, reset))
                self._effects.append(SnapshotLoaded(snapshot_id))
                self._set_high_watermark(snapshot_id.end_offset)
        self._send_fetch(now)
