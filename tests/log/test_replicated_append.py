"""A follower's append: the leader's batches copied byte for byte, offsets and epochs kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.storage.log.partition import PartitionLog
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode
from strom.wire.records import iter_batches
from strom.wire.records.batch import BatchHeader
from tests.log.helpers import T0, batch, open_log, read_everything


def _leader_bytes(leader: PartitionLog, start: int = 0) -> bytes:
    """Everything the leader holds from `start`, as a replica fetch would carry it."""
    out = b""
    offset = start
    while offset < leader.log_end_offset:
        result = leader.read(offset, 1 << 20)
        chunk = result.read_bytes()
        out += chunk
        offset = leader.log_end_offset if not chunk else _next_offset(chunk)
    return out


def _batches(data: bytes) -> list[bytes]:
    return [bytes(view) for _, view in iter_batches(data, allow_partial=False)]


def _next_offset(chunk: bytes) -> int:
    last = 0
    for _, view in iter_batches(chunk, allow_partial=False):
        last = BatchHeader.parse(view).last_offset
    return last + 1


def _leader(tmp_path: Path) -> PartitionLog:
    leader = open_log(tmp_path / "leader" / "t-0")
    leader.append(batch([b"a", b"b"]), 1, T0)
    leader.append(batch([b"c"], pid=7, epoch=0, seq=0), 1, T0)
    leader.append(batch([b"d", b"e", b"f"]), 3, T0)
    return leader


def test_the_follower_holds_the_leaders_bytes_offsets_and_epochs(tmp_path: Path) -> None:
    leader = _leader(tmp_path)
    follower = open_log(tmp_path / "follower" / "t-0")
    follower.high_watermark_follows_appends = False
    result = follower.append_replicated(_leader_bytes(leader), T0)
    assert (result.base_offset, result.last_offset) == (0, 5)
    assert follower.log_end_offset == leader.log_end_offset == 6
    assert _leader_bytes(follower) == _leader_bytes(leader)
    assert follower.epochs.entries == leader.epochs.entries == [(1, 0), (3, 3)]
    assert follower.end_offset_for_epoch(1) == leader.end_offset_for_epoch(1) == (1, 3)
    assert [p.producer_id for p in follower.producers()] == [7]
    # the follower's high watermark is the leader's to give
    assert follower.high_watermark == 0
    assert follower.update_high_watermark(4) == 4
    assert follower.update_high_watermark(99) == 6
    assert read_everything(follower) == read_everything(leader)


def test_appends_continue_in_pieces_and_survive_a_reopen(tmp_path: Path) -> None:
    leader = _leader(tmp_path)
    follower = open_log(tmp_path / "follower" / "t-0")
    for piece in _batches(_leader_bytes(leader)):
        follower.append_replicated(piece, T0)
    follower.close()
    reopened = open_log(tmp_path / "follower" / "t-0")
    assert reopened.log_end_offset == 6
    assert reopened.epochs.entries == [(1, 0), (3, 3)]
    assert read_everything(reopened) == read_everything(leader)


def test_a_batch_that_does_not_continue_the_log_is_refused(tmp_path: Path) -> None:
    leader = _leader(tmp_path)
    follower = open_log(tmp_path / "follower" / "t-0")
    everything = _leader_bytes(leader)
    follower.append_replicated(everything, T0)
    with pytest.raises(LogAppendError) as refused:
        follower.append_replicated(everything, T0)  # offsets 0.. again
    assert refused.value.error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert follower.log_end_offset == 6


def test_a_corrupt_batch_changes_nothing(tmp_path: Path) -> None:
    leader = _leader(tmp_path)
    follower = open_log(tmp_path / "follower" / "t-0")
    damaged = bytearray(_leader_bytes(leader))
    damaged[-1] ^= 0xFF  # the last batch's CRC no longer matches
    with pytest.raises(LogAppendError) as refused:
        follower.append_replicated(damaged, T0)
    assert refused.value.error is ErrorCode.CORRUPT_MESSAGE
    assert follower.log_end_offset == 0
    assert follower.epochs.entries == []


def test_a_divergent_tail_is_truncated_then_replaced(tmp_path: Path) -> None:
    """What a returning follower does after OffsetForLeaderEpoch: cut, then copy."""
    leader = _leader(tmp_path)
    follower = open_log(tmp_path / "follower" / "t-0")
    follower.append(batch([b"a", b"b"]), 1, T0)
    follower.append(batch([b"x", b"y"]), 2, T0)  # written as leader in epoch 2, never replicated
    # the leader's history: epoch 1 ends at 3, so the follower keeps [0, 2) of epoch 1 ...
    assert leader.end_offset_for_epoch(2) == (1, 3)
    follower.truncate_to(2)
    follower.append_replicated(_leader_bytes(leader, 2), T0)
    assert read_everything(follower) == read_everything(leader)
    assert follower.epochs.entries == [(1, 0), (3, 3)]


@pytest.mark.parametrize("reopen", [False, True])
def test_a_retried_batch_on_a_promoted_follower_is_a_duplicate(
    tmp_path: Path, reopen: bool
) -> None:
    """The leader appended an idempotent producer's batches and the follower copied them, but
    the producer never heard back (the leader died). Its retries reach the follower, now leader
    in a newer epoch: the producer state rebuilt from the replicated batches recognises each
    retry (the offsets it was first written at, nothing appended), and the next sequence goes
    on from there."""
    leader = open_log(tmp_path / "leader" / "t-0")
    first = batch([b"a", b"b"], pid=7, epoch=0, seq=0)
    second = batch([b"c"], pid=7, epoch=0, seq=2)
    leader.append(first, 1, T0)
    leader.append(second, 1, T0)
    follower = open_log(tmp_path / "follower" / "t-0")
    follower.high_watermark_follows_appends = False
    follower.append_replicated(_leader_bytes(leader), T0)
    if reopen:
        follower.close()
        follower = open_log(tmp_path / "follower" / "t-0", clean=False)
    follower.start_leader_epoch(2)
    for retried, (base, last) in ((first, (0, 1)), (second, (2, 2))):
        again = follower.append(retried, 2, T0)
        assert again.duplicate
        assert (again.base_offset, again.last_offset) == (base, last)
    assert follower.log_end_offset == 3
    nxt = follower.append(batch([b"d"], pid=7, epoch=0, seq=3), 2, T0)
    assert (nxt.duplicate, nxt.base_offset) == (False, 3)
    with pytest.raises(LogAppendError) as gap:
        follower.append(batch([b"e"], pid=7, epoch=0, seq=9), 2, T0)
    assert gap.value.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
