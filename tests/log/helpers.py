"""Shared builders for the strom.storage tests: batches, a fake clock, decoding reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from strom.storage import LogConfig, LogManager, PartitionLog
from strom.wire.records import Codec, Record, build_batch, iter_batches
from strom.wire.records.builder import decode_batch

T0 = 1_700_000_000_000
TOPIC = "t"


class Clock:
    """A settable millisecond clock."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(
    values: Sequence[bytes] = (b"v",),
    *,
    ts: int = T0,
    keys: Sequence[bytes | None] | None = None,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    codec: Codec = Codec.NONE,
    transactional: bool = False,
) -> bytearray:
    """One v2 batch as a producer sends it (base offset 0); record i has timestamp ts + i."""
    keys = keys if keys is not None else [b"k"] * len(values)
    records = [Record(k, v, (), ts + i) for i, (k, v) in enumerate(zip(keys, values, strict=True))]
    return build_batch(
        records,
        codec=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


def open_log(
    path: Path, config: LogConfig | None = None, clock: Clock | None = None, **kw: object
) -> PartitionLog:
    """A standalone PartitionLog in `path` (clean open unless clean=False is passed)."""
    return PartitionLog.open(
        path,
        TOPIC,
        0,
        config or LogConfig(),
        clock=clock or Clock(),
        **kw,  # type: ignore[arg-type]
    )


def decode_all(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in whole batches of `data`."""
    out: list[tuple[int, bytes | None]] = []
    for _, view in iter_batches(data, allow_partial=False):
        _, records = decode_batch(view)
        out.extend((r.offset, r.value) for r in records)
    return out


def read_everything(log: PartitionLog, start: int | None = None) -> list[tuple[int, bytes | None]]:
    """Read from `start` (default log start) to the end, batch range by range."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes | None]] = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result.size > 0, f"empty read at {offset}"
        got = decode_all(result.read_bytes())
        out.extend(r for r in got if r[0] >= offset)
        offset = got[-1][0] + 1
    return out


def manager(
    dirs: Sequence[Path], clock: Clock | None = None, config: LogConfig | None = None
) -> LogManager:
    m = LogManager(list(dirs), clock or Clock(), topic_config=lambda _t: config or LogConfig())
    m.load()
    return m


def crash(m: LogManager) -> None:
    """Simulate kill -9: drop every fd without flushing, checkpointing or writing the marker."""
    for p in m.partitions():
        p.close(clean=False)


def get_log(m: LogManager, topic: str = TOPIC, partition: int = 0) -> PartitionLog:
    found = m.get(topic, partition)
    assert found is not None, f"{topic}-{partition} not loaded"
    return found
