"""What a Raft replica keeps durable, and the one interface its stores share.

The Raft core (`strom.coordinator.raft`) never calls a store: it emits write requests
(`AppendEntries`, `TruncateTo`, `PersistQuorumState`, `InstallSnapshot`), the
driver performs them *in order* through a `RaftStore` and reports completion back to the core.
After a crash the driver calls `load()` and starts a fresh core from the `RecoveredState`.

Two stores: `MemoryRaftStore` here (for the deterministic simulator: it can lose a suffix of
un-synced writes on a simulated crash) and `DiskRaftStore` in `strom.storage.raft.raft_disk` (the
quorum-state file of `strom.storage.raft.quorum_state` plus the log and snapshots of
`strom.storage.raft.raft_log`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol


class Entry(NamedTuple):
    """One Raft log entry: its offset, the leader epoch that wrote it, and opaque bytes.

    `control` marks the entry a new leader writes at the start of its epoch (Kafka's
    LeaderChangeMessage control record); the state machine skips it.
    """

    offset: int
    epoch: int
    data: bytes
    control: bool = False


class SnapshotId(NamedTuple):
    """A snapshot covers offsets below `end_offset`; `epoch` is the epoch of the last one."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class QuorumState:
    """The election state that must survive a crash (Kafka's `quorum-state` file).

    `leader_id`/`voted_id` are -1 when unknown/none. A replica never votes twice in an epoch
    and never forgets an epoch it has seen, because this is written before it acts on it.
    """

    leader_epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    voters: frozenset[int] = frozenset()


@dataclass(slots=True)
class RecoveredState:
    """Everything a restarted core needs: what `RaftStore.load` returns."""

    quorum: QuorumState
    snapshot: SnapshotId | None = None
    snapshot_data: bytes = b""
    entries: list[Entry] = field(default_factory=list)
    """Entries after the snapshot (or from offset 0), contiguous, in order."""
    log_start: int = 0
    """Offset of the first entry (== snapshot end offset when the log was cut there)."""


class RaftStore(Protocol):
    """Durable Raft state. Each method returns once the change is durable (fsynced)."""

    def load(self) -> RecoveredState: ...

    def write_quorum_state(self, state: QuorumState) -> None: ...

    def append(self, entries: list[Entry]) -> None:
        """Append entries starting exactly at the current end offset."""

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at `offset` or above."""

    def install_snapshot(self, snapshot: SnapshotId, data: bytes, *, reset_log: bool) -> None:
        """Store a snapshot and make its end the log start: drop the entries below it, or with
        `reset_log` the whole log (it diverged from the snapshot)."""


class MemoryRaftStore:
    """A `RaftStore` in memory, for the simulator and unit tests."""

    def __init__(self, voters: frozenset[int] = frozenset()) -> None:
        self.quorum = QuorumState(voters=voters)
        self.snapshot: SnapshotId | None = None
        self.snapshot_data = b""
        self.entries: list[Entry] = []
        self.log_start = 0

    @property
    def end_offset(self) -> int:
        return self.log_start + len(self.entries)

    def load(self) -> RecoveredState:
        return RecoveredState(
            self.quorum, self.snapshot, self.snapshot_data, list(self.entries), self.log_start
        )

    def write_quorum_state(self, state: QuorumState) -> None:
        self.quorum = state

    def append(self, entries: list[Entry]) -> None:
        if entries and entries[0].offset != self.end_offset:
            raise ValueError(f"append at {entries[0].offset}, log ends at {self.end_offset}")
        self.entries.extend(entries)

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_start:
            raise ValueError(f"truncate to {offset} below the log start {self.log_start}")
        del self.entries[offset - self.log_start :]

    def install_snapshot(self, snapshot: SnapshotId, data: bytes, *, reset_log: bool) -> None:
        self.snapshot, self.snapshot_data = snapshot, data
        if reset_log:
            self.entries = []
        else:
            del self.entries[: snapshot.end_offset - self.log_start]
        self.log_start = snapshot.end_offset
