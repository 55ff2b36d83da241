"""Leader-epoch history: checkpoint file, OffsetForLeaderEpoch, truncation."""

from __future__ import annotations

from pathlib import Path

from strom.storage import LogConfig
from strom.storage.log.epoch import LeaderEpochCache
from strom.storage.log.partition import PartitionLog
from tests.log.helpers import T0, batch, crash, get_log, manager, open_log

CHECKPOINT = "leader-epoch-checkpoint"


def test_checkpoint_written_in_kafka_format_on_new_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert (tmp_path / "t-0" / CHECKPOINT).read_text() == "0\n0\n"
    log.append(batch([b"a", b"b"]), 1, T0)
    log.append(batch(), 1, T0)
    log.append(batch(), 4, T0)
    assert (tmp_path / "t-0" / CHECKPOINT).read_text() == "0\n2\n1 0\n4 3\n"
    assert log.latest_epoch() == 4
    assert not list((tmp_path / "t-0").glob("*.tmp"))


def test_end_offset_for_epoch_matches_kafka(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.end_offset_for_epoch(0) == (-1, -1)
    for epoch, n in [(2, 3), (5, 2), (7, 4)]:
        for _ in range(n):
            log.append(batch(), epoch, T0)
    # entries: 2@0, 5@3, 7@5; log end 9
    assert log.end_offset_for_epoch(7) == (7, 9)  # latest epoch: the log end
    assert log.end_offset_for_epoch(5) == (5, 5)
    assert log.end_offset_for_epoch(6) == (5, 5)  # unknown epoch: largest below, next's start
    assert log.end_offset_for_epoch(2) == (2, 3)
    assert log.end_offset_for_epoch(1) == (1, 0)  # below all: first entry's start
    assert log.end_offset_for_epoch(8) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.epoch_at(4) == 5
    assert log.epoch_at(0) == 2


def test_checkpoint_ahead_of_log_is_cut_on_load(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    log.append(batch(), 3, T0)
    crash(m)
    (tmp_path / "t-0" / CHECKPOINT).write_text("0\n2\n3 0\n9 1\n")
    log = get_log(manager([tmp_path]))
    assert log.latest_epoch() == 3
    assert (tmp_path / "t-0" / CHECKPOINT).read_text() == "0\n1\n3 0\n"


def test_missing_or_corrupt_checkpoint_rebuilt_from_batches(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    for epoch in (1, 1, 2, 6):
        log.append(batch(), epoch, T0)
    m.close()
    (tmp_path / "t-0" / CHECKPOINT).write_text("0\n5\n1 0\n")
    log = get_log(manager([tmp_path]))
    assert log.epochs.entries == [(1, 0), (2, 2), (6, 3)]


def test_truncate_to_drops_later_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for epoch in (1, 1, 2, 2, 3):
        log.append(batch(), epoch, T0)
    log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.latest_epoch() == 2
    assert log.end_offset_for_epoch(2) == (2, 3)


def test_truncating_at_the_log_end_drops_an_epoch_that_started_there(tmp_path: Path) -> None:
    """A replica led epoch 2 from its log end without appending, then follows a leader whose
    epoch 1 ends there: truncating to its own log end must drop the epoch-2 entry (Kafka's
    truncateTo does), or every fetch names epoch 2, is told to diverge, truncates to where it
    already is, and never catches up (found by the whole-cluster simulation, seed 48)."""
    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        log.append(batch(), 1, T0)
    log.start_leader_epoch(2)
    assert log.latest_epoch() == 2
    log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.latest_epoch() == 1


def test_cache_semantics() -> None:
    cache = LeaderEpochCache(Path("/nonexistent"))
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)
    assert cache.assign(3, 10)
    assert cache.assign(2, 20)  # a lower epoch wipes the entries it contradicts
    assert cache.entries == [(1, 0), (2, 20)]
    assert cache.truncate_from_start(25)
    assert cache.entries == [(2, 25)]
    assert not cache.truncate_from_start(25)
    assert not cache.assign(-1, 30)


def test_an_epoch_lost_with_its_unsynced_checkpoint_comes_back_from_the_batches(
    tmp_path: Path,
) -> None:
    """Appends replace the checkpoint without fsync (none on the event loop), so a power loss
    can lose that write; the batches past the recovery point still carry their epoch."""
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    log.append(batch(), 1, T0)
    log.flush()
    m.checkpoint()  # recovery point 1 on disk; the checkpoint "1 0" is durable
    assert not _unsynced(log)
    log.append(batch(), 3, T0)
    log.append(batch(), 3, T0)
    assert _unsynced(log)
    crash(m)
    (tmp_path / "t-0" / CHECKPOINT).write_text("0\n1\n1 0\n")  # the unsynced write was lost
    log = get_log(manager([tmp_path]))
    assert log.epochs.entries == [(1, 0), (3, 1)]
    assert (tmp_path / "t-0" / CHECKPOINT).read_text() == "0\n2\n1 0\n3 1\n"
    assert log.end_offset_for_epoch(1) == (1, 1)


def test_flush_makes_the_checkpoint_durable(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(), 2, T0)
    assert _unsynced(log)
    log.flush()
    assert not _unsynced(log)


def _unsynced(log: PartitionLog) -> bool:
    """(A call, so that mypy does not carry a narrowed attribute across appends.)"""
    return log.epochs.unsynced
