"""What the log cleaner plans a pass from: a consistent picture of one log, taken under its lock.

`PartitionLog.clean_view()` builds it; `LogCleaner` and `CleaningPass` read it
without the lock, which is safe because closed segments never change once
rolled. A pass commits only if the log's `generation` is still the view's.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.storage.log.log_config import LogConfig
from strom.storage.log.segment import LogSegment


@dataclass(frozen=True)
class CleanView:
    """What the cleaner plans a pass from, taken under the log's lock."""

    segments: list[LogSegment]
    """Closed segments, oldest first (never the active one)."""
    largest_timestamps: list[int]
    """Per closed segment: its largest record timestamp, else its file's mtime."""
    first_timestamps: list[int]
    """Per closed segment: its first batch's max timestamp (-1 if none)."""
    log_start_offset: int
    log_end_offset: int
    active_base: int
    first_unstable_offset: int
    """The first offset of an open transaction, else the log end: never cleaned past."""
    producer_last: dict[int, int]
    """Producer id -> last offset of its newest batch (kept even when emptied)."""
    generation: int
    config: LogConfig
