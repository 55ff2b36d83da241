"""Shared pieces of the cleaner tests: keyed writes, full reads with batch headers, a cleaner."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strom.storage import CleanerSettings, LogCleaner, LogConfig, LogManager, PartitionLog
from strom.storage.cleaner.cleaner_pass import PassResult
from strom.storage.cleaner.log_cleaner import assess
from strom.wire.records import BatchHeader, Codec, Record, build_batch, decode_batch, iter_batches
from tests.log.helpers import Clock

COMPACT = LogConfig(
    segment_bytes=1200,
    index_interval_bytes=200,
    cleanup_policy=("compact",),
    delete_retention_ms=10_000,
    min_cleanable_dirty_ratio=0.0,
)

Entry = tuple[bytes, bytes | None]
"""(key, value); a None value is a tombstone."""


def keyed(
    entries: Sequence[Entry],
    ts: int,
    *,
    codec: Codec = Codec.NONE,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
) -> bytearray:
    """One producer batch of keyed records; record i has timestamp ts + i."""
    return build_batch(
        [Record(k, v, (("h", b"x"),), ts + i) for i, (k, v) in enumerate(entries)],
        codec=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


@dataclass(frozen=True)
class Seen:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    batch: BatchHeader


def read_all(log: PartitionLog, start: int | None = None) -> list[Seen]:
    """Every record from `start` (default: the log start) to the end, with its batch header."""
    offset = log.log_start_offset if start is None else start
    out: list[Seen] = []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read_bytes()
        if not data:
            break
        for header, view in iter_batches(data, allow_partial=False):
            for r in decode_batch(view, header)[1]:
                if r.offset >= offset:
                    out.append(Seen(r.offset, r.key, r.value, r.timestamp, header))
            offset = max(offset, header.next_offset)
    return out


def cleaner(m: LogManager, clock: Clock, **settings: object) -> LogCleaner:
    return LogCleaner(m, CleanerSettings(**settings), clock)  # type: ignore[arg-type]


def clean(c: LogCleaner, log: PartitionLog, now: int | None = None) -> PassResult | None:
    """One pass over `log` whether or not it is dirty enough (None if it was not compacted)."""
    now = c.clock() if now is None else now
    found = assess(log, now)
    assert found is not None, "not a compacted, open log"
    return c.clean(found, now)


def latest(
    entries: Sequence[tuple[int, bytes, bytes | None]],
) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of the last write per key, from (offset, key, value) triples."""
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in entries:
        out[key] = (offset, value)
    return out
