"""A partition's log: ordered segments plus offsets, producer state and epoch history.

Everything here is synchronous and meant for the broker's event-loop thread,
except `flush()`, which fsyncs and so runs in a worker thread (it holds the
lock only to copy fds and to publish the new recovery point, never across
I/O), and the cleaner's calls (strom.storage.replace), made from its own thread.
Appends, reads and queries take the lock, so a reader never sees a segment
list the cleaner is swapping.
Offsets: log_start_offset <= high_watermark <= log_end_offset (the next offset
to assign). On a single node the high watermark follows the log end.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from pathlib import Path

from strom.storage.config import LONG_MAX, LogConfig
from strom.storage.errors import KafkaStorageError, LogAppendError, OffsetOutOfRange
from strom.storage.fileio import SegmentFile
from strom.storage.lifecycle import SegmentLifecycle
from strom.storage.loader import LoadedLog, load_partition
from strom.storage.producer_entry import ProducerInfo
from strom.storage.queries import segment_index
from strom.storage.recompress import recompress
from strom.storage.replace import SegmentReplacement
from strom.storage.results import AppendResult, ReadResult, SegmentInfo
from strom.storage.segment import LogSegment
from strom.storage.validate import AppendOrigin, validate_records
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import (
    BatchHeader,
    decode_batch,
    parse_end_txn_marker,
    patch_base_offset,
    patch_leader_epoch,
    set_max_timestamp,
)

log = logging.getLogger(__name__)
TIMESTAMP_TYPE_MASK = 0x08
_JITTER_RNG = random.Random()  # for segment.jitter.ms, shared: its state is 2.5 KB a log


class PartitionLog(SegmentLifecycle, SegmentReplacement):
    """The storage of one topic-partition; see the module docstring for threading."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        loaded: LoadedLog,
        clock: Callable[[], int],
        rng: random.Random | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        self._rng = rng or _JITTER_RNG
        self._segments: list[LogSegment] = loaded.segments
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        self.epochs = loaded.epochs
        self.producer_state = loaded.producers
        self.high_watermark = self.log_end_offset
        self.last_flush_ms = clock()
        self.flush_requested = False
        self.parent_unsynced = False
        """A new directory whose entry in the data dir the first flush must make durable."""
        self.on_flush_wanted: Callable[[], None] | None = None
        """Told after a roll, and after appends under a finite flush policy (LogManager)."""
        self.failed: str | None = None
        self.closed = False
        self.generation = 0
        self.clean_offset: int | None = None
        self.tombstone_horizon_ms: int | None = None
        self._lock = threading.Lock()
        self._pending_snapshots: list[Path] = []
        active = self._segments[-1]
        active.roll_jitter_ms = config.random_jitter(self._rng)
        active.set_index_limits(config.index_interval_bytes, config.segment_index_bytes)

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        clock: Callable[[], int],
        clean: bool = True,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        rng: random.Random | None = None,
    ) -> PartitionLog:
        """Open or create the log in `directory` (created if missing), recovering if unclean."""
        directory.mkdir(parents=True, exist_ok=True)
        loaded = load_partition(
            directory,
            config,
            clean=clean,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            now_ms=clock(),
        )
        return cls(directory, topic, partition, config, loaded, clock, rng)

    # --- append ----------------------------------------------------------------------------

    def append(
        self,
        records: memoryview | bytes | bytearray,
        leader_epoch: int,
        now_ms: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Validate, assign offsets and write; LogAppendError leaves the log unchanged."""
        with self._lock:
            if self.failed is not None or self.closed:
                raise KafkaStorageError(f"{self.name} is offline: {self.failed or 'closed'}")
            buf = bytearray(records)
            batches = validate_records(buf, self.config, now_ms, origin)
            buf, batches = recompress(buf, batches, self.config)
            lat = self.config.log_append_time
            staged = self.producer_state.stage(check_sequences=origin is AppendOrigin.CLIENT)
            offset = self.log_end_offset
            for pos, header in batches:
                if header.has_producer_id:
                    if origin is AppendOrigin.CLIENT:
                        dup = staged.duplicate_of(header)
                        if dup is not None:
                            return AppendResult(
                                dup.first_offset,
                                dup.last_offset,
                                dup.timestamp if lat else -1,
                                self.log_start_offset,
                                duplicate=True,
                            )
                    coordinator_epoch = _coordinator_epoch(buf, pos, header)
                    staged.add_batch(
                        header, offset, now_ms if lat else header.max_timestamp, coordinator_epoch
                    )
                offset += header.last_offset_delta + 1
            base = self.log_end_offset
            self._assign(buf, batches, base, leader_epoch, now_ms if lat else None)
            self._write(buf, batches, leader_epoch, now_ms)
            staged.commit()
            self.high_watermark = self.log_end_offset
            if self.config.flush_messages < LONG_MAX or self.config.flush_ms < LONG_MAX:
                self._want_flush()
            return AppendResult(
                base, self.log_end_offset - 1, now_ms if lat else -1, self.log_start_offset
            )

    @staticmethod
    def _assign(
        buf: bytearray,
        batches: list[tuple[int, BatchHeader]],
        base: int,
        leader_epoch: int,
        append_time: int | None,
    ) -> None:
        """Patch offsets, leader epoch and (LogAppendTime) max timestamp into the request bytes."""
        view = memoryview(buf)
        offset = base
        for pos, header in batches:
            patch_base_offset(buf, offset, pos)
            patch_leader_epoch(buf, leader_epoch, pos)
            header.base_offset, header.partition_leader_epoch = offset, leader_epoch
            if append_time is not None:
                set_max_timestamp(view[pos : pos + header.size], append_time)
                header.max_timestamp = append_time
                header.attributes |= TIMESTAMP_TYPE_MASK
            offset = header.next_offset

    def _write(
        self, buf: bytearray, batches: list[tuple[int, BatchHeader]], leader_epoch: int, now_ms: int
    ) -> None:
        """Epoch checkpoint first (harmless if the data then fails), roll if due, then one write."""
        base = self.log_end_offset
        old_epochs = list(self.epochs.entries)
        try:
            if self.epochs.assign(leader_epoch, base):
                self.epochs.save(sync=False)  # the next flush fsyncs it (see broker.log.epoch)
            active = self._segments[-1]
            max_ts = max(h.max_timestamp for _, h in batches)
            if active.should_roll(
                len(buf),
                max_ts,
                batches[-1][1].last_offset,
                self.config.segment_bytes,
                self.config.roll_ms,
                now_ms,
            ):
                self._roll(now_ms)
            self._segments[-1].append(memoryview(buf), batches)
        except OSError as exc:
            self.epochs.entries = old_epochs
            self.failed = f"{type(exc).__name__}: {exc}"
            log.error("%s: storage error on append, taking partition offline: %s", self.name, exc)
            raise KafkaStorageError(f"{self.name}: {exc}") from exc

    # --- read ------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None
    ) -> ReadResult:
        """Whole batches from the one containing `offset`, within one segment, up to max_bytes."""
        with self._lock:
            return self._read(offset, max_bytes, min_one_batch, max_offset)

    def _read(
        self, offset: int, max_bytes: int, min_one_batch: bool, max_offset: int | None
    ) -> ReadResult:
        start, end = self.log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRange(offset, start, end)
        limit = end if max_offset is None else min(max_offset, end)
        segments = self._segments
        for segment in segments[segment_index(segments, offset) :]:
            if offset >= limit:
                break
            file = segment.open_file()  # one open for the lookups below and the result
            found = segment.find_batch(offset)
            if found is None:
                continue
            pos, header = found
            bound = segment.size
            if limit < segment.next_offset:
                stop = segment.find_batch(limit)
                bound = stop[0] if stop is not None else segment.size
            if pos + header.size > bound or (header.size > max_bytes and not min_one_batch):
                break
            stop_at = max(pos + max(max_bytes, 0), pos + header.size)
            size = segment.boundary_at_or_before(min(stop_at, bound), pos) - pos
            return self._result(file, pos, size)
        return self._result(None, 0, 0)

    def _result(self, file: SegmentFile | None, position: int, size: int) -> ReadResult:
        return ReadResult(
            file,
            position,
            size,
            self.log_start_offset,
            self.log_end_offset,
            self.high_watermark,
            self.high_watermark,
        )

    # --- configuration and introspection --------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            active = self._segments[-1]
            active.set_index_limits(config.index_interval_bytes, config.segment_index_bytes)
            active.roll_jitter_ms = config.random_jitter(self._rng)
        self._want_flush()  # a new flush policy may already be due

    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path)
            for s in self._segments
        ]

    def producers(self) -> list[ProducerInfo]:
        return self.producer_state.infos()

    def expire_producers(self, now_ms: int, max_age_ms: int) -> int:
        """producer.id.expiration.ms: forget idle producers without open transactions."""
        with self._lock:
            return self.producer_state.expire(now_ms, max_age_ms)


def _coordinator_epoch(buf: bytearray, pos: int, header: BatchHeader) -> int:
    """The coordinator epoch of a commit/abort marker batch (-1 for data batches)."""
    if not header.is_control:
        return -1
    try:
        records = decode_batch(memoryview(buf)[pos : pos + header.size], check_crc=False)[1]
        return parse_end_txn_marker(records[0]).coordinator_epoch
    except (ProtocolError, IndexError) as exc:
        raise LogAppendError(ErrorCode.INVALID_RECORD, f"bad control batch: {exc}") from exc


__all__ = [
    "AppendOrigin",
    "AppendResult",
    "KafkaStorageError",
    "LogAppendError",
    "OffsetOutOfRange",
    "PartitionLog",
    "ReadResult",
    "SegmentInfo",
]
