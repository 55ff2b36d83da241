"""What the Raft core asks of its driver: messages to send, writes to make durable, news.

The driver drains `RaftCore.take_effects()` after every input and handles the effects in order:

- `Send`: put the message on the wire to node `dest` (or drop it if unreachable). The core only
  emits a `Send` once every write issued before it is durable, so a vote is never granted, nor an
  offset reported to the leader, before it is on disk.
- the `Write` effects (`PersistQuorumState`, `AppendEntries`, `TruncateTo`, `InstallSnapshot`):
  perform them in order through a `strom.storage.raft.raft_store.RaftStore`, then call
  `RaftCore.writes_durable(seq)` with the highest `seq` done. They may be batched and synced
  together; they must not be reordered.
- `HighWatermark`: entries below `offset` are committed: apply them to the state machine.
- `LeaderChange`: the quorum's leader (or -1) for `epoch`, as this node now knows it; never this
  node unless it leads now (`RaftCore.current_leader_id`).
- `SnapshotLoaded`: the state machine must reload from the snapshot (a follower fetched one).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.coordinator.raft.messages import RaftMessage
from strom.storage.raft.raft_store import Entry, QuorumState, SnapshotId


@dataclass(frozen=True, slots=True)
class Send:
    dest: int
    message: RaftMessage


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    seq: int
    state: QuorumState


@dataclass(frozen=True, slots=True)
class AppendEntries:
    seq: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class TruncateTo:
    seq: int
    offset: int


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    seq: int
    snapshot: SnapshotId
    data: bytes
    reset_log: bool


@dataclass(frozen=True, slots=True)
class HighWatermark:
    offset: int


@dataclass(frozen=True, slots=True)
class LeaderChange:
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    snapshot: SnapshotId


Write = PersistQuorumState | AppendEntries | TruncateTo | InstallSnapshot
Effect = Send | Write | HighWatermark | LeaderChange | SnapshotLoaded
