"""`DiskRaftStore`: the `RaftStore` a real node runs on, in `__cluster_metadata-0/`.

It holds the `quorum-state` file (`strom.storage.raft.quorum_state`) and the log segments and
snapshots (`strom.storage.raft.raft_log`) in one directory; their modules give the byte layouts. Each
method returns once its change is fsynced; the driver calls them in a worker thread, in the order
the core emitted them.

Crash recovery (`load`): each file recovers by its own rule; then, because a snapshot is written
before the log is cut back to it, a crash between the two leaves a snapshot next to a log that
does not continue it. `load` finishes that step: if the entry just below the snapshot's end is
not in the snapshot's epoch (or is missing), the log is reset to start empty at the snapshot's end.
A log that starts after the snapshot's end (or after offset 0 with no snapshot) has lost entries
that no crash can lose: `load` refuses it (RaftLogError) rather than guess.

The single node of `strom serve` is a one-voter quorum on this same store. The single-node
metadata log older Strom versions wrote in the same directory is migrated once at start-up
(`strom.storage.raft.single_node_log`).
"""

from __future__ import annotations

from pathlib import Path

from strom.storage.raft.quorum_state import read_quorum_state, write_quorum_state
from strom.storage.raft.raft_log import DEFAULT_SEGMENT_BYTES, RaftLogDir, RaftLogError
from strom.storage.raft.raft_store import Entry, QuorumState, RecoveredState, SnapshotId

LOG_DIR_NAME = "__cluster_metadata-0"


class DiskRaftStore:
    """The Raft state of one node under `<metadata.log.dir>/__cluster_metadata-0/`."""

    def __init__(
        self,
        metadata_dir: Path,
        voters: frozenset[int],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        self.directory = Path(metadata_dir) / LOG_DIR_NAME
        self._voters = voters
        self._log = RaftLogDir.open(self.directory, segment_bytes=segment_bytes)

    @property
    def end_offset(self) -> int:
        """The offset the next appended entry gets."""
        return self._log.end_offset

    def load(self) -> RecoveredState:
        quorum = read_quorum_state(self.directory) or QuorumState(voters=self._voters)
        if quorum.voters and quorum.voters != self._voters:
            raise RaftLogError(
                f"{self.directory} holds the Raft state of a quorum of voters "
                f"{sorted(quorum.voters)}, but this node is configured for {sorted(self._voters)}:"
                " configure controller.quorum.voters as this node had it, or use an empty "
                "metadata.log.dir"
            )
        found = self._log.latest_snapshot()
        entries = self._log.read_all()
        start = self._log.start_offset
        end = 0 if found is None else found[0].end_offset
        if start > end:
            raise RaftLogError(
                f"the metadata log in {self.directory} starts at {start} but "
                + (
                    "there is no snapshot"
                    if found is None
                    else f"the latest snapshot ends at {end}"
                )
                + ": entries in between are missing; restore them or reformat this node"
            )
        if found is None:
            return RecoveredState(quorum, None, b"", entries, start)
        snapshot, data = found
        continues = start <= end <= self._log.end_offset and (
            end == start or entries[end - 1 - start].epoch == snapshot.epoch
        )
        if not continues:
            self._log.reset(end)
            entries, start = [], end
        return RecoveredState(quorum, snapshot, data, entries, start)

    def write_quorum_state(self, state: QuorumState) -> None:
        write_quorum_state(self.directory, state)

    def append(self, entries: list[Entry]) -> None:
        self._log.append(entries)

    def truncate_to(self, offset: int) -> None:
        self._log.truncate_to(offset)

    def install_snapshot(self, snapshot: SnapshotId, data: bytes, *, reset_log: bool) -> None:
        self._log.write_snapshot(snapshot, data)
        if reset_log:
            self._log.reset(snapshot.end_offset)
        else:
            self._log.delete_before(snapshot.end_offset)

    def close(self) -> None:
        """Nothing stays open between calls; here for the driver's symmetry."""
