"""The Raft state on disk: the log, snapshots and quorum-state file, and their recovery."""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path

import pytest

from strom.coordinator.raft.core import RaftCore
from strom.coordinator.raft.effects import (
    AppendEntries,
    InstallSnapshot,
    PersistQuorumState,
    TruncateTo,
)
from strom.coordinator.raft.states import Role
from strom.storage.raft.quorum_state import (
    QuorumStateError,
    read_quorum_state,
    write_quorum_state,
)
from strom.storage.raft.raft_disk import LOG_DIR_NAME, DiskRaftStore
from strom.storage.raft.raft_log import RaftLogDir, RaftLogError
from strom.storage.raft.raft_store import Entry, MemoryRaftStore, QuorumState, RaftStore, SnapshotId

VOTERS = frozenset({1, 2, 3})


def entries(first: int, count: int, epoch: int) -> list[Entry]:
    return [Entry(first + i, epoch, b"e%d" % (first + i)) for i in range(count)]


def test_appends_and_a_truncation_inside_a_batch_survive_a_reopen(tmp_path: Path) -> None:
    store = DiskRaftStore(tmp_path, VOTERS)
    store.append(entries(0, 3, 1))
    store.append([Entry(3, 2, b"", control=True), *entries(4, 4, 2)])
    store.truncate_to(6)
    store.append(entries(6, 2, 3))
    loaded = DiskRaftStore(tmp_path, VOTERS).load()
    expected = [*entries(0, 3, 1), Entry(3, 2, b"", control=True), *entries(4, 2, 2)]
    assert loaded.entries == [*expected, *entries(6, 2, 3)]
    assert loaded.log_start == 0
    assert loaded.quorum == QuorumState(voters=VOTERS)


class _Crash(BaseException):
    """The process dies here (kill -9: what was written stays, nothing more is done)."""


@pytest.mark.parametrize("segment_bytes", [1 << 30, 120])
def test_a_crash_at_any_step_of_a_truncation_inside_a_batch_keeps_the_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, segment_bytes: int
) -> None:
    """Followers batch what they fetch their own way, so a truncation can fall inside a batch:
    its kept part is rewritten. A crash at any fsync of that step must leave a prefix of the log,
    never one without the entries below the cut (this voter acknowledged them)."""
    before = [*entries(0, 3, 1), *entries(3, 5, 2), *entries(8, 2, 2)]
    real_fsync = os.fsync
    for crash_at in itertools.count(1):
        directory = tmp_path / f"crash-at-{crash_at}"
        log = RaftLogDir.open(directory, segment_bytes=segment_bytes)
        log.append(before[:3])
        log.append(before[3:8])  # one batch, offsets 3-7: the cut at 5 falls inside it
        log.append(before[8:])
        calls = 0

        def crashing_fsync(fd: int, crash_at: int = crash_at) -> None:
            nonlocal calls
            calls += 1
            if calls == crash_at:
                raise _Crash
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", crashing_fsync)
        try:
            log.truncate_to(5)
            finished = True
        except _Crash:
            finished = False
        finally:
            monkeypatch.setattr(os, "fsync", real_fsync)
        recovered = RaftLogDir.open(directory, segment_bytes=segment_bytes).read_all()
        assert recovered[:5] == before[:5], f"a crash at fsync {crash_at} lost kept entries"
        assert recovered == before[: len(recovered)], "what survives is a prefix of the log"
        if finished:
            assert recovered == before[:5]
            assert crash_at > 2
            break


def test_a_torn_tail_is_cut_and_earlier_damage_refuses_to_open(tmp_path: Path) -> None:
    store = DiskRaftStore(tmp_path, VOTERS, segment_bytes=200)
    for offset in range(0, 12, 2):
        store.append(entries(offset, 2, 1))
    directory = tmp_path / LOG_DIR_NAME
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 2
    with open(segments[-1], "ab") as handle:
        handle.write(b"\x00\x00\x00\x00\x00\x00\x00\x0c\x00\x00\x01")  # an append cut short
    assert DiskRaftStore(tmp_path, VOTERS, segment_bytes=200).load().entries == entries(0, 12, 1)

    data = bytearray(segments[0].read_bytes())
    data[-3] ^= 0xFF
    segments[0].write_bytes(bytes(data))
    with pytest.raises(RaftLogError, match="corrupt"):
        DiskRaftStore(tmp_path, VOTERS, segment_bytes=200)


def test_truncation_across_segments_deletes_the_later_ones(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path / "log", segment_bytes=150)
    for offset in range(10):
        log.append(entries(offset, 1, 1))
    assert len(list((tmp_path / "log").glob("*.log"))) > 3
    log.truncate_to(3)
    assert log.end_offset == 3
    reopened = RaftLogDir.open(tmp_path / "log", segment_bytes=150)
    assert reopened.read_all() == entries(0, 3, 1)
    reopened.append(entries(3, 1, 2))
    assert RaftLogDir.open(tmp_path / "log").read_all() == [*entries(0, 3, 1), *entries(3, 1, 2)]


def test_the_quorum_state_file_is_kafkas_json(tmp_path: Path) -> None:
    assert read_quorum_state(tmp_path) is None
    state = QuorumState(leader_epoch=5, leader_id=2, voted_id=2, voters=VOTERS)
    write_quorum_state(tmp_path, state)
    document = json.loads((tmp_path / "quorum-state").read_text())
    assert document == {
        "clusterId": "",
        "leaderId": 2,
        "leaderEpoch": 5,
        "votedId": 2,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }
    assert read_quorum_state(tmp_path) == state
    assert not list(tmp_path.glob("*.tmp"))


def test_a_damaged_quorum_state_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text('{"leaderId": 1, "leaderEp')
    with pytest.raises(QuorumStateError, match="reformat"):
        read_quorum_state(tmp_path)


def test_a_snapshot_cuts_the_log_or_replaces_it(tmp_path: Path) -> None:
    store = DiskRaftStore(tmp_path, VOTERS)
    store.append(entries(0, 10, 1))
    store.install_snapshot(SnapshotId(6, 1), b"state-6", reset_log=False)
    loaded = DiskRaftStore(tmp_path, VOTERS).load()
    assert loaded.snapshot == SnapshotId(6, 1)
    assert loaded.snapshot_data == b"state-6"
    assert [e.offset for e in loaded.entries][-1] == 9

    store.install_snapshot(SnapshotId(20, 4), b"state-20", reset_log=True)
    loaded = DiskRaftStore(tmp_path, VOTERS).load()
    assert (loaded.snapshot, loaded.entries, loaded.log_start) == (SnapshotId(20, 4), [], 20)
    assert len(list((tmp_path / LOG_DIR_NAME).glob("*.checkpoint"))) == 1


def test_a_crash_between_snapshot_and_log_reset_is_finished_on_load(tmp_path: Path) -> None:
    store = DiskRaftStore(tmp_path, VOTERS)
    store.append(entries(0, 5, 1))
    # the snapshot (from the leader, a different history) is written; the reset never happens
    RaftLogDir.open(tmp_path / LOG_DIR_NAME).write_snapshot(SnapshotId(3, 2), b"leader-state")
    loaded = DiskRaftStore(tmp_path, VOTERS).load()
    assert (loaded.snapshot, loaded.entries, loaded.log_start) == (SnapshotId(3, 2), [], 3)
    store = DiskRaftStore(tmp_path, VOTERS)
    store.append(entries(3, 1, 2))
    assert DiskRaftStore(tmp_path, VOTERS).load().entries == entries(3, 1, 2)


def test_a_damaged_newest_snapshot_falls_back_to_an_older_one(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path)
    log.write_snapshot(SnapshotId(3, 1), b"old")
    older = (tmp_path / next(p.name for p in tmp_path.glob("*.checkpoint"))).read_bytes()
    log.write_snapshot(SnapshotId(9, 2), b"new")
    (tmp_path / f"{3:020d}-{1:010d}.checkpoint").write_bytes(older)  # crash before the delete
    newest = tmp_path / f"{9:020d}-{2:010d}.checkpoint"
    newest.write_bytes(newest.read_bytes()[:-1] + b"X")
    assert log.latest_snapshot() == (SnapshotId(3, 1), b"old")
    (tmp_path / f"{3:020d}-{1:010d}.checkpoint").unlink()
    with pytest.raises(RaftLogError, match="damaged"):
        log.latest_snapshot()


def _random_operations(store: RaftStore, seed: int) -> None:
    rng = random.Random(seed)
    end, epoch = 0, 1
    for _ in range(40):
        choice = rng.randrange(5)
        if choice < 3:
            count = rng.randrange(1, 4)
            store.append(entries(end, count, epoch))
            end += count
        elif choice == 3 and end > 0:
            end = rng.randrange(end + 1)
            store.truncate_to(end)
            epoch += 1
        else:
            epoch += 1
            store.write_quorum_state(QuorumState(epoch, rng.choice((-1, 1, 2)), -1, VOTERS))


@pytest.mark.parametrize("seed", range(5))
def test_the_disk_store_keeps_what_the_memory_store_keeps(tmp_path: Path, seed: int) -> None:
    memory = MemoryRaftStore(VOTERS)
    _random_operations(memory, seed)
    disk = DiskRaftStore(tmp_path, VOTERS, segment_bytes=300)
    _random_operations(disk, seed)
    loaded = DiskRaftStore(tmp_path, VOTERS, segment_bytes=300).load()
    assert loaded.entries == memory.load().entries
    assert loaded.quorum == memory.load().quorum


def test_a_single_voter_core_restarts_from_its_disk(tmp_path: Path) -> None:
    """The core's writes, performed on disk the way a driver does, bring it back as it was."""
    store = DiskRaftStore(tmp_path, frozenset({1}))
    core = RaftCore(1, frozenset({1}), store.load(), random.Random(0), 0)
    now = 0
    assert core.role is Role.LEADER, "the only voter leads at once"
    core.propose([b"one", b"two"], now)

    def perform() -> None:
        for effect in core.take_effects():
            if isinstance(effect, PersistQuorumState):
                store.write_quorum_state(effect.state)
            elif isinstance(effect, AppendEntries):
                store.append(list(effect.entries))
            elif isinstance(effect, TruncateTo):
                store.truncate_to(effect.offset)
            elif isinstance(effect, InstallSnapshot):
                store.install_snapshot(effect.snapshot, effect.data, reset_log=effect.reset_log)
            else:
                continue
            core.writes_durable(effect.seq, now)

    perform()
    assert core.high_watermark == 3
    core.snapshot(2, b"state after one")
    perform()

    again = RaftCore(
        1, frozenset({1}), DiskRaftStore(tmp_path, frozenset({1})).load(), random.Random(0), 0
    )
    assert again.role is Role.LEADER
    assert again.epoch == 2
    assert again.log.snapshot == SnapshotId(2, 1)
    assert again.log.entry(2) == Entry(2, 1, b"two")


def test_a_snapshot_write_cut_short_is_deleted_on_open(tmp_path: Path) -> None:
    log = RaftLogDir.open(tmp_path)
    log.write_snapshot(SnapshotId(3, 1), b"whole")
    (tmp_path / f"{9:020d}-{2:010d}.checkpoint.part").write_bytes(b"SRSN\x00")
    reopened = RaftLogDir.open(tmp_path)
    assert not list(tmp_path.glob("*.part"))
    assert reopened.latest_snapshot() == (SnapshotId(3, 1), b"whole")
