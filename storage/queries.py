"""Read-only lookups over a partition's segments: ListOffsets and OffsetForLeaderEpoch.

Kept apart from `partition.py` to keep modules small; `PartitionLog` inherits
these. Timestamp answers are per record, as Kafka's: the time index narrows the
search to one batch, and only that batch is decoded.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from strom.storage.config import LogConfig
from strom.storage.epoch import LeaderEpochCache
from strom.storage.errors import OffsetOutOfRange
from strom.storage.fileio import SegmentFile, scan_headers
from strom.storage.index import NO_TIMESTAMP
from strom.storage.producer_state import ProducerStateManager
from strom.storage.segment import LogSegment
from strom.wire.errors import ProtocolError
from strom.wire.records import BatchHeader, TimestampType, decode_batch

Found = tuple[int, int, int]
"""(offset, timestamp, leader_epoch) answered by timestamp queries."""


class LogQueries:
    """State shared by the partition log's parts, and the lookups that only read it."""

    directory: Path
    topic: str
    partition: int
    config: LogConfig
    log_start_offset: int
    high_watermark: int
    recovery_point: int
    epochs: LeaderEpochCache
    producer_state: ProducerStateManager
    _segments: list[LogSegment]
    _lock: threading.Lock

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._segments[-1].next_offset

    def offset_for_timestamp(self, timestamp: int) -> Found | None:
        """(offset, timestamp, leader_epoch) of the first record with timestamp >= `timestamp`
        at or after the log start; None if there is none (ListOffsets then answers -1)."""
        with self._lock:
            for segment in self._segments:
                if (
                    segment.max_timestamp >= timestamp
                    and segment.next_offset > self.log_start_offset
                ):
                    found = find_timestamp(segment, timestamp, self.log_start_offset)
                    if found is not None:
                        return found
            return None

    def max_timestamp_offset(self) -> Found | None:
        """ListOffsets MAX_TIMESTAMP (-3): the first record holding the largest timestamp."""
        with self._lock:
            best: LogSegment | None = None
            for segment in self._segments:
                if segment.next_offset <= self.log_start_offset:
                    continue
                if segment.max_timestamp != NO_TIMESTAMP and (
                    best is None or segment.max_timestamp > best.max_timestamp
                ):
                    best = segment
            return None if best is None else find_max_timestamp(best)

    def latest_epoch(self) -> int | None:
        """The newest leader epoch that wrote to this log (None if none recorded)."""
        return self.epochs.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (leader_epoch, end_offset); (-1, -1) when unknown.

        The latest epoch ends at the log end; an older one ends where the next
        known epoch starts, reported with the largest known epoch <= the request.
        """
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_at(self, offset: int) -> int | None:
        """The leader epoch that wrote `offset` (for fetch epoch validation)."""
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        return self.epochs.epoch_at(offset)


def segment_index(segments: list[LogSegment], offset: int) -> int:
    """Index of the segment whose range holds `offset` (0 if below all)."""
    return max(bisect_right(segments, offset, key=_base_offset) - 1, 0)


def _base_offset(segment: LogSegment) -> int:
    return segment.base_offset


def find_timestamp(segment: LogSegment, timestamp: int, min_offset: int) -> Found | None:
    """First record at offset >= min_offset with timestamp >= `timestamp`, via the time index."""
    _, indexed = segment.time_index.lookup(timestamp)
    _, start = segment.offset_index.lookup(max(indexed, min_offset))
    file = segment.open_file()
    for pos, header in scan_headers(file.fd, start, segment.size):
        if header.last_offset >= min_offset and header.max_timestamp >= timestamp:
            found = _record_at(file, pos, header, lambda ts: ts >= timestamp, min_offset)
            if found is not None:
                return found
    return None


def find_max_timestamp(segment: LogSegment) -> Found | None:
    """The record holding the segment's max timestamp (the first, on ties)."""
    if segment.max_timestamp == NO_TIMESTAMP:
        return None
    target = segment.max_timestamp
    _, start = segment.offset_index.lookup(segment.offset_of_max_timestamp)
    file = segment.open_file()
    for pos, header in scan_headers(file.fd, start, segment.size):
        if header.max_timestamp == target:
            return _record_at(file, pos, header, lambda ts: ts == target, header.base_offset)
    return None


def _record_at(
    file: SegmentFile, pos: int, header: BatchHeader, match: Callable[[int], bool], min_offset: int
) -> Found | None:
    """Resolve a batch to the record ListOffsets reports (decodes just this batch)."""
    epoch = header.partition_leader_epoch
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return max(header.base_offset, min_offset), header.max_timestamp, epoch
    try:
        _, records = decode_batch(os.pread(file.fd, header.size, pos), check_crc=False)
    except ProtocolError:
        return max(header.base_offset, min_offset), header.max_timestamp, epoch
    for record in records:
        if record.offset >= min_offset and match(record.timestamp):
            return record.offset, record.timestamp, epoch
    return None
