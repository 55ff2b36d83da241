"""The single-node metadata log of older Strom versions: found, read, and replaced once.

Before a single node became a one-voter Raft quorum it kept its own metadata log in the same
`<metadata.log.dir>/__cluster_metadata-0/` (its byte layout is in
`strom.coordinator.metadata.single_node_log`, which turns it into an image). Such a directory
holds log segments with batches, or `.checkpoint` snapshots, and no `quorum-state`: a Raft
replica writes its quorum-state before its first entry, and `strom format` writes it for a
controller, so a Raft log never exists without one.

`read` returns what the old log holds, as bytes: its segments recovered as a Raft log's are
(`RaftLogDir.open`: the torn tail of the last segment is cut, damage anywhere else refuses to
open), then every batch whole, and the newest snapshot's file.

`replace` swaps in the Raft replica's state in its place (the caller's snapshot of the image,
a quorum-state, a log that starts empty after the snapshot), crash-safe through renames:

    1. build it in `__cluster_metadata-0.migrating/`, every file fsynced (a leftover from an
       earlier try is deleted first)
    2. rename `__cluster_metadata-0` to `__cluster_metadata-0.single-node`, fsync the directory
    3. rename `__cluster_metadata-0.migrating` to `__cluster_metadata-0`, fsync the directory
    4. delete `__cluster_metadata-0.single-node`

`read` first finishes a replacement a crash interrupted: `.migrating` beside the old log
(a crash in 1 or 2) is deleted and the migration runs again; `.single-node` with no
`__cluster_metadata-0` (a crash between 2 and 3) completes step 3; `.single-node` beside the
new log (a crash in 4) is deleted. Neither name parses as a partition directory, so the data
directory scan passes them by.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from strom.storage.durable import fsync_dir
from strom.storage.raft.quorum_state import FILE_NAME as QUORUM_STATE
from strom.storage.raft.quorum_state import write_quorum_state
from strom.storage.raft.raft_disk import LOG_DIR_NAME
from strom.storage.raft.raft_log import (
    SEGMENT_SUFFIX,
    SNAPSHOT_SUFFIX,
    RaftLogDir,
    parse_snapshot_name,
)
from strom.storage.raft.raft_store import QuorumState, SnapshotId

log = logging.getLogger(__name__)

STAGED = LOG_DIR_NAME + ".migrating"
RETIRED = LOG_DIR_NAME + ".single-node"


@dataclass(frozen=True)
class SingleNodeLog:
    """What an old single-node metadata log holds."""

    snapshot: tuple[SnapshotId, bytes] | None
    """The newest snapshot: its id and its file's bytes (KRaft's checkpoint format)."""
    batches: list[bytes]
    """Every batch of the log (after recovery), in offset order."""


def holds_single_node_log(metadata_dir: Path) -> bool:
    """Whether `metadata_dir` holds an old single-node metadata log (see the module docstring):
    snapshots, or segments that are not empty, and no quorum-state."""
    directory = Path(metadata_dir) / LOG_DIR_NAME
    if not directory.is_dir() or (directory / QUORUM_STATE).exists():
        return False
    return any(
        p.name.endswith(SNAPSHOT_SUFFIX)
        or (p.name.endswith(SEGMENT_SUFFIX) and p.stat().st_size > 0)
        for p in directory.iterdir()
    )


def read(metadata_dir: Path) -> SingleNodeLog | None:
    """The old log in `metadata_dir` (None if there is none), after finishing a replacement a
    crash interrupted. Blocking."""
    metadata_dir = Path(metadata_dir)
    _finish_interrupted(metadata_dir)
    if not holds_single_node_log(metadata_dir):
        return None
    directory = metadata_dir / LOG_DIR_NAME
    segments = RaftLogDir.open(directory)
    batches = [bytes(batch) for batch in segments.batches()]
    snapshots = sorted(
        (found, path)
        for path in directory.iterdir()
        if (found := parse_snapshot_name(path.name)) is not None
    )
    snapshot = None
    if snapshots:
        snapshot_id, path = snapshots[-1]
        snapshot = (snapshot_id, path.read_bytes())
    return SingleNodeLog(snapshot, batches)


def replace(metadata_dir: Path, quorum: QuorumState, snapshot: SnapshotId, data: bytes) -> None:
    """Replace the old log by a Raft replica's state: `quorum`, and the snapshot `snapshot`
    holding `data` with an empty log after it (steps 1-4 of the module docstring). Blocking."""
    metadata_dir = Path(metadata_dir)
    staged, live, retired = (
        metadata_dir / STAGED,
        metadata_dir / LOG_DIR_NAME,
        metadata_dir / RETIRED,
    )
    shutil.rmtree(staged, ignore_errors=True)
    segments = RaftLogDir.open(staged)
    write_quorum_state(staged, quorum)
    segments.write_snapshot(snapshot, data)
    segments.reset(snapshot.end_offset)
    live.rename(retired)
    fsync_dir(metadata_dir)
    staged.rename(live)
    fsync_dir(metadata_dir)
    shutil.rmtree(retired)
    log.info(
        "migrated the single-node metadata log in %s to a one-voter Raft log (snapshot at "
        "offset %d, epoch %d)", metadata_dir, snapshot.end_offset, snapshot.epoch,
    )  # fmt: skip


def _finish_interrupted(metadata_dir: Path) -> None:
    staged, live, retired = (
        metadata_dir / STAGED,
        metadata_dir / LOG_DIR_NAME,
        metadata_dir / RETIRED,
    )
    if retired.is_dir() and not live.exists():
        staged.rename(live)
        fsync_dir(metadata_dir)
    if retired.is_dir():
        shutil.rmtree(retired)
    if staged.is_dir():
        shutil.rmtree(staged)
