"""Append/read round trips, segment rolls, index lookups and read bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from strom.storage import LogConfig, OffsetOutOfRange
from strom.wire.records import Codec, iter_batches
from tests.log.helpers import T0, Clock, batch, decode_all, open_log, read_everything

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)


def test_first_append_gets_offset_zero_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    result = log.append(batch([b"a", b"b", b"c"]), leader_epoch=0, now_ms=T0)
    assert (result.base_offset, result.last_offset) == (0, 2)
    assert result.log_append_time_ms == -1
    assert result.log_start_offset == 0
    assert not result.duplicate
    assert log.log_end_offset == log.high_watermark == 3
    assert read_everything(log) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_offsets_and_epoch_are_patched_into_stored_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(3):
        log.append(batch([b"x"] * (i + 1)), leader_epoch=7, now_ms=T0)
    data = log.read(0, 1 << 20).read_bytes()
    headers = [h for h, _ in iter_batches(data, allow_partial=False, check_crc=True)]
    assert [h.base_offset for h in headers] == [0, 1, 3]
    assert {h.partition_leader_epoch for h in headers} == {7}


def test_round_trip_across_many_segment_rolls(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    expected = []
    for i in range(200):
        values = [f"m{i}-{j}".encode() for j in range(1 + i % 4)]
        base = log.append(batch(values), 0, T0).base_offset
        expected += [(base + j, v) for j, v in enumerate(values)]
    assert len(log.segments) > 10
    assert all(s.size_bytes <= 1024 for s in log.segments)
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert read_everything(log) == expected
    assert log.size_bytes() == sum(s.size_bytes for s in log.segments)
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert len(names) == len(log.segments)


def test_read_at_every_offset_starts_at_the_containing_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    for i in range(60):
        log.append(batch([b"%d" % i] * 3), 0, T0)
    for offset in range(log.log_end_offset):
        result = log.read(offset, 1)
        records = decode_all(result.read_bytes())
        assert records[0][0] == offset - offset % 3
        assert len(records) == 3  # min_one_batch: exactly one whole batch


def test_sparse_index_is_used_and_consistent(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=256))
    for i in range(300):
        log.append(batch([b"payload-%03d" % i]), 0, T0)
    segment = log._segments[0]
    index = segment.offset_index
    assert index.entries > 10
    for n in range(index.entries):
        rel, pos = index.entry(n)
        found = segment.find_batch(segment.base_offset + rel)
        assert found is not None
        assert found[0] == pos
    assert index.lookup(0) == (0, 0)
    path = tmp_path / "t-0" / "00000000000000000000.index"
    assert not path.exists()  # a new partition has none; the entries wait in memory for a flush
    log.flush()
    assert path.stat().st_size == 8 * index.entries


def test_max_bytes_returns_whole_batches_only(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    one = len(batch([b"x" * 50]))
    for _ in range(10):
        log.append(batch([b"x" * 50]), 0, T0)
    result = log.read(0, one * 3 + one // 2)
    assert result.size == one * 3
    assert len(decode_all(result.read_bytes())) == 3
    assert log.read(0, 1, min_one_batch=False).size == 0
    assert log.read(0, 1, min_one_batch=True).size == one
    assert log.read(0, 0).size == one


def test_max_offset_excludes_batches_at_or_past_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(5):
        log.append(batch([b"a", b"b"]), 0, T0)
    got = decode_all(log.read(0, 1 << 20, max_offset=4).read_bytes())
    assert [o for o, _ in got] == [0, 1, 2, 3]
    assert log.read(4, 1 << 20, max_offset=4).size == 0
    assert log.read(4, 1 << 20, max_offset=5).size == 0  # batch 4-5 not wholly below 5


def test_read_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a"]), 0, T0)
    empty = log.read(1, 100)
    assert empty.size == 0
    assert empty.read_bytes() == b""
    assert empty.fd == -1
    assert empty.log_end_offset == 1
    assert empty.high_watermark == 1
    with pytest.raises(OffsetOutOfRange) as info:
        log.read(2, 100)
    assert info.value.error.name == "OFFSET_OUT_OF_RANGE"
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_read_result_supports_sendfile(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    for i in range(40):
        log.append(batch([b"z%d" % i]), 0, T0)
    result = log.read(17, 300)
    assert result.path is not None
    assert result.path.suffix == ".log"
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    try:
        sent = os.sendfile(out, result.fd, result.position, result.size)
    finally:
        os.close(out)
    assert sent == result.size
    assert (tmp_path / "out").read_bytes() == result.read_bytes()


def test_compressed_batches_are_stored_as_sent(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sent = batch([b"hello"] * 20, codec=Codec.ZSTD)
    log.append(sent, 0, T0)
    stored = log.read(0, 1 << 20).read_bytes()
    assert stored[61:] == bytes(sent[61:])  # records blob untouched, not recompressed
    assert decode_all(stored) == [(i, b"hello") for i in range(20)]


def test_segment_ms_roll_uses_first_batch_timestamp_and_jitter(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000), clock)
    log.append(batch(ts=T0), 0, T0)
    log.append(batch(ts=T0 + 1000), 0, T0)
    assert len(log.segments) == 1
    log.append(batch(ts=T0 + 1001), 0, T0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_index_full_rolls_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_index_bytes=16, index_interval_bytes=0))
    for _ in range(12):
        log.append(batch(), 0, T0)
    assert len(log.segments) >= 3
    assert read_everything(log) == [(i, b"v") for i in range(12)]


def test_update_config_takes_effect(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"x" * 100]), 0, T0)
    log.update_config(LogConfig(segment_bytes=200))
    log.append(batch([b"x" * 100]), 0, T0)
    assert len(log.segments) == 2
    assert log.config.segment_bytes == 200


def test_reads_at_the_tail_find_the_last_batch_after_appends_truncation_and_reopening(
    tmp_path: Path,
) -> None:
    """A fetch at the log's tail (a follower's, a caught-up consumer's) finds the last batch
    without the index (LogSegment's last-batch hint): whatever changed the tail since."""
    log = open_log(tmp_path / "t-0", SMALL)

    def tail_is(base: int, values: list[bytes]) -> None:
        expected = [(base + j, v) for j, v in enumerate(values)]
        for offset in range(base, base + len(values)):  # the whole batch holding `offset`
            assert decode_all(log.read(offset, 1 << 20).read_bytes()) == expected

    for i in range(40):  # single- and multi-record batches, across segment rolls
        values = [b"v%d-%d" % (i, j) for j in range(1 + i % 3)]
        tail_is(log.append(batch(values), 0, T0).base_offset, values)
    log.truncate_to(log.log_end_offset - 1)  # cuts into the last batch: its hint must go
    end = log.log_end_offset
    assert decode_all(log.read(end - 1, 1 << 20).read_bytes())[-1][0] == end - 1
    tail_is(log.append(batch([b"after"]), 0, T0).base_offset, [b"after"])
    log.close()
    log = open_log(tmp_path / "t-0", SMALL)  # a reopened log's hint comes from its scan
    tail_is(end, [b"after"])
    tail_is(log.append(batch([b"x", b"y"]), 0, T0).base_offset, [b"x", b"y"])
    for offset in range(log.log_start_offset, log.log_end_offset):  # nothing else moved
        assert decode_all(log.read(offset, 1).read_bytes())[0][0] <= offset
