"""Finding records in segments: the segment holding an offset, the record answering a
ListOffsets timestamp query.

Pure functions over `LogSegment`s; `PartitionLog` calls them under its lock.
Timestamp answers are per record, as Kafka's: the time index narrows the search
to one batch, and only that batch is decoded.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from strom.storage import disk
from strom.storage.fileio import SegmentFile, scan_headers
from strom.storage.log.index import NO_TIMESTAMP
from strom.storage.log.segment import LogSegment
from strom.wire.errors import ProtocolError
from strom.wire.records import BatchHeader, TimestampType, decode_batch

Found = tuple[int, int, int]
"""(offset, timestamp, leader_epoch) answered by timestamp queries."""


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
        _, records = decode_batch(disk.pread(file.fd, header.size, pos), check_crc=False)
    except ProtocolError:
        return max(header.base_offset, min_offset), header.max_timestamp, epoch
    for record in records:
        if record.offset >= min_offset and match(record.timestamp):
            return record.offset, record.timestamp, epoch
    return None
