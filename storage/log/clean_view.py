"""What the log cleaner plans a pass from: a consistent picture of one log, taken under its lock.

`PartitionLog.clean_view()` builds it; `LogCleaner` and `CleaningPass` read it
without the lock, which is safe because closed segments never change once
rolled. A pass commits only if the log's `generation` is still the view's.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.storage.log.log_config import LogConfig
from strom.storage.log.segment import LogSegment
from strom.storage.log.txn_index import AbortedTxn


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
    """The last stable offset (Kafka's cleaner never cleans past it): below it every
    transaction is decided, so the aborted ones are all in `aborted`."""
    producer_last: dict[int, int]
    """Producer id -> last offset of its newest batch (kept even when emptied)."""
    producer_marker_epoch: dict[int, int]
    """Producer id -> epoch, for producers whose newest entry is a marker (no data batch in
    their epoch): a marker of that epoch is kept, emptied if need be, for fencing."""
    aborted: list[AbortedTxn]
    """Aborted transactions starting below the last stable offset, by first offset."""
    generation: int
    config: LogConfig
