"""The core's in-memory log against a brute-force reference, over random histories."""

from __future__ import annotations

import random

import pytest

from strom.coordinator.raft.log import ReplicaLog
from strom.storage.raft.raft_store import Entry, QuorumState, RecoveredState, SnapshotId


def reference_end_for_epoch(
    entries: list[Entry], snapshot: SnapshotId | None, epoch: int
) -> SnapshotId | None:
    """The largest epoch <= `epoch` held and the offset after its last entry, by scanning."""
    known = [(e.epoch, e.offset) for e in entries]
    if snapshot is not None:
        known.insert(0, (snapshot.epoch, snapshot.end_offset - 1))
    candidates = [ep for ep, _ in known if ep <= epoch]
    if not candidates:
        return None
    best = max(candidates)
    last = max(offset for ep, offset in known if ep == best)
    return SnapshotId(last + 1, best)


@pytest.mark.parametrize("seed", range(200))
def test_epoch_lookups_match_a_scan_through_appends_truncations_and_snapshots(seed: int) -> None:
    rng = random.Random(seed)
    log = ReplicaLog(RecoveredState(QuorumState()))
    entries: list[Entry] = []
    snapshot: SnapshotId | None = None
    epoch = 1
    for _ in range(60):
        action = rng.randrange(6)
        end = log.end_offset
        if action < 3:
            epoch += rng.random() < 0.3
            new = [Entry(end + i, epoch, b"") for i in range(rng.randrange(1, 4))]
            log.append(new)
            entries += new
        elif action == 3 and end > log.start_offset:
            cut = rng.randrange(log.start_offset, end)
            log.truncate_to(cut)
            entries = [e for e in entries if e.offset < cut]
            epoch += 1
        elif action == 4 and end > log.start_offset:
            at = rng.randrange(log.start_offset + 1, end + 1)
            held = log.entry(at - 1)
            assert held is not None
            snapshot = SnapshotId(at, held.epoch)
            assert not log.install_snapshot(snapshot, b"s")
            entries = [e for e in entries if e.offset >= at]
        elif action == 5:
            # a snapshot from a leader, beyond or beside this log: it replaces the log
            snapshot = SnapshotId(end + rng.randrange(1, 5), epoch + 1)
            epoch += 1
            assert log.install_snapshot(snapshot, b"leader")
            entries = []
        assert [log.entry(o) for o in range(log.start_offset, log.end_offset)] == entries
        for asked in range(epoch + 2):
            assert log.end_offset_for_epoch(asked) == reference_end_for_epoch(
                entries, snapshot, asked
            ), (asked, entries, snapshot)
        if entries:
            assert log.last_epoch == entries[-1].epoch
        elif snapshot is not None:
            assert log.last_epoch == snapshot.epoch


def test_a_recovered_log_drops_what_its_snapshot_covers() -> None:
    entries = [Entry(o, 1 if o < 4 else 2, b"") for o in range(8)]
    log = ReplicaLog(RecoveredState(QuorumState(), SnapshotId(5, 2), b"s", entries, 0))
    assert log.start_offset == 5
    assert log.end_offset == 8
    assert log.end_offset_for_epoch(2) == SnapshotId(8, 2)
    assert log.end_offset_for_epoch(1) is None
