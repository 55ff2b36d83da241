"""A follower finds where its log parts from the leader's, cuts there and copies the rest."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from strom.broker.replication.divergence import Truncation, diverging_epoch, truncation_point
from strom.storage.log.partition import PartitionLog
from tests.log.helpers import T0, batch, open_log, read_everything

History = Sequence[tuple[int, int]]
"""(leader epoch, how many single-record batches it wrote), oldest first."""


def _log(path: Path, history: History, tag: bytes) -> PartitionLog:
    log = open_log(path)
    for epoch, count in history:
        for i in range(count):
            log.append(batch([tag + b"-%d-%d" % (epoch, i)]), epoch, T0)
    return log


def _converge(leader: PartitionLog, follower: PartitionLog) -> list[Truncation]:
    """The follower's fetch loop: cut while the leader reports divergence, then copy."""
    cuts: list[Truncation] = []
    for _ in range(10):
        last_epoch = follower.latest_epoch()
        answer = diverging_epoch(
            leader, follower.log_end_offset, -1 if last_epoch is None else last_epoch
        )
        if answer is None:
            break
        cut = truncation_point(follower, *answer)
        cuts.append(cut)
        follower.truncate_to(cut.offset)
    else:
        pytest.fail("no agreement after 10 rounds")
    offset = follower.log_end_offset
    while offset < leader.log_end_offset:
        chunk = leader.read(offset, 1 << 20).read_bytes()
        follower.append_replicated(chunk, T0)
        offset = follower.log_end_offset
    return cuts


def _pair(
    tmp_path: Path, leader: History, follower: History, shared: History = ()
) -> tuple[PartitionLog, PartitionLog]:
    """Two logs: `shared` written identically to both (replicated), then their own tails."""
    lead = _log(tmp_path / "leader" / "t-0", [], b"")
    foll = _log(tmp_path / "follower" / "t-0", [], b"")
    for epoch, count in shared:
        for i in range(count):
            data = batch([b"shared-%d-%d" % (epoch, i)])
            lead.append(bytearray(data), epoch, T0)
            foll.append_replicated(lead.read(lead.log_end_offset - 1, 1 << 20).read_bytes(), T0)
    for log, history, tag in ((lead, leader, b"leader"), (foll, follower, b"follower")):
        for epoch, count in history:
            for i in range(count):
                log.append(batch([tag + b"-%d-%d" % (epoch, i)]), epoch, T0)
    return lead, foll


def test_a_follower_that_is_behind_is_served_at_once(tmp_path: Path) -> None:
    leader, follower = _pair(tmp_path, leader=[(3, 3)], follower=[], shared=[(1, 3)])
    assert diverging_epoch(leader, 3, 1) is None
    assert _converge(leader, follower) == []
    assert read_everything(follower) == read_everything(leader)


def test_an_unreplicated_tail_of_an_old_leader_is_cut(tmp_path: Path) -> None:
    # the follower led epoch 2 and wrote two batches nobody copied; the leader took epoch 3
    leader, follower = _pair(tmp_path, leader=[(1, 1), (3, 3)], follower=[(2, 2)], shared=[(1, 2)])
    # leader: epoch 1 at [0, 3), epoch 3 at [3, 6); follower: epoch 1 at [0, 2), 2 at [2, 4)
    assert diverging_epoch(leader, 4, 2) == (1, 3)
    assert truncation_point(follower, 1, 3) == Truncation(2, True)  # where 1 ends for both
    assert _converge(leader, follower) == [Truncation(2, True)]
    assert read_everything(follower) == read_everything(leader)
    assert follower.epochs.entries == leader.epochs.entries


def test_a_follower_whose_whole_log_the_leader_never_had_starts_over(tmp_path: Path) -> None:
    leader, follower = _pair(tmp_path, leader=[(1, 2), (3, 4)], follower=[(2, 4)])
    assert _converge(leader, follower) == [Truncation(0, True)]
    assert read_everything(follower) == read_everything(leader)


def test_an_epoch_only_the_follower_had_takes_a_second_round(tmp_path: Path) -> None:
    # leader: 1 at [0, 2), 3 at [2, 8), now leading epoch 5 from 8;
    # follower: 1 at [0, 2), 2 at [2, 4), 4 at [4, 6)
    leader, follower = _pair(tmp_path, leader=[(3, 6)], follower=[(2, 2), (4, 2)], shared=[(1, 2)])
    leader.start_leader_epoch(5)
    cuts = _converge(leader, follower)
    assert cuts == [Truncation(4, False), Truncation(2, True)]
    assert read_everything(follower) == read_everything(leader)
    assert follower.epochs.entries == [(1, 0), (3, 2)]
    assert leader.epochs.entries == [(1, 0), (3, 2), (5, 8)]


def test_without_its_own_epoch_recorded_the_leader_cannot_place_a_newer_one(
    tmp_path: Path,
) -> None:
    """Why a new leader records its epoch's start (issue 12): asked about an epoch newer than any
    in its log, it knows nothing, and the follower could only fall back to its high watermark."""
    leader, _ = _pair(tmp_path, leader=[(3, 6)], follower=[(2, 2), (4, 2)], shared=[(1, 2)])
    assert diverging_epoch(leader, 6, 4) == (-1, -1)
    leader.start_leader_epoch(5)
    assert diverging_epoch(leader, 6, 4) == (3, 8)


def test_a_leader_without_epochs_that_old_keeps_the_high_watermark(tmp_path: Path) -> None:
    _, follower = _pair(tmp_path, leader=[], follower=[(2, 4)])
    follower.update_high_watermark(1)
    assert truncation_point(follower, -1, -1) == Truncation(1, True)
