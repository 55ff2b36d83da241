"""The metadata log on disk: `<metadata.log.dir>/__cluster_metadata-0/`.

Layout, as in KRaft: segment files named by the offset of their first batch,
`<20-digit base offset>.log`, holding v2 RecordBatches back to back (see
`records` for the batch and record framing). Snapshots live in the same
directory (see `snapshot`). Kafka's `.index`/`.timeindex`, `quorum-state` and
`leader-epoch-checkpoint` files are not written: the log is small and read
from the start of a segment, and the Raft epoch is carried in every batch.

Durability: `append` writes one batch with unbuffered writes at the segment's
last good length and fsyncs it (and the directory when a segment is created)
before it returns, so an acknowledged command survives a crash. A failed write
or fsync (ENOSPC, EIO) raises OSError after cutting the file back to its last
good length (`os.ftruncate`; nothing is buffered, so nothing of the failed batch
can reach the file later). If even that cut fails, the next append repeats it
before writing, and a crash meanwhile leaves a torn tail that recovery removes:
the log stays usable once the disk is.

Crash recovery (`open`): every segment is scanned and each batch's length and
CRC checked. In the last segment, the first batch that is incomplete or fails
its CRC, and everything after it, is a torn tail -- an append that was never
acknowledged -- and is truncated away. The same damage in an earlier segment
would be loss of acknowledged data, so opening fails with MetadataError
rather than guess. Batches must follow each other without gaps.

All methods block; the async driver calls them in a worker thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from strom.coordinator.metadata.metadata_records import (
    MetadataBatch,
    MetadataError,
    decode_batch,
    encode_batch,
)
from strom.storage.durable import fsync_dir
from strom.wire.errors import ProtocolError
from strom.wire.message import Message
from strom.wire.records import iter_batches, validate_batch

log = logging.getLogger(__name__)

LOG_DIR_NAME = "__cluster_metadata-0"
SEGMENT_SUFFIX = ".log"
DEFAULT_SEGMENT_BYTES = 1 << 30


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


@dataclass
class _Segment:
    base_offset: int
    end_offset: int
    """One past the last offset held (== base_offset when empty)."""
    size: int
    path: Path


class MetadataLog:
    """Append-only, fsynced segments of metadata batches. Use `MetadataLog.open`."""

    def __init__(
        self, directory: Path, segments: list[_Segment], last_epoch: int, segment_bytes: int
    ) -> None:
        self.directory = directory
        self._segments = segments
        self._last_epoch = last_epoch
        self._segment_bytes = segment_bytes
        self._fd: int | None = None
        self._tail_dirty = False
        """A failed write may have left bytes past the active segment's size."""

    @classmethod
    def open(
        cls, metadata_dir: str | Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES
    ) -> MetadataLog:
        """Open (creating if need be) and recover the log under `metadata_dir`."""
        directory = Path(metadata_dir) / LOG_DIR_NAME
        if not directory.is_dir():
            directory.mkdir(parents=True)
            fsync_dir(directory.parent)
        names = sorted(p for p in directory.iterdir() if p.name.endswith(SEGMENT_SUFFIX))
        segments: list[_Segment] = []
        last_epoch = -1
        for index, path in enumerate(names):
            base = _parse_base(path)
            if segments and base != segments[-1].end_offset:
                raise MetadataError(
                    f"{path.name}: starts at {base}, expected {segments[-1].end_offset}"
                )
            segment, epoch = _recover(path, base, last=index == len(names) - 1)
            segments.append(segment)
            last_epoch = max(last_epoch, epoch)
        opened = cls(directory, segments, last_epoch, segment_bytes)
        if not segments:
            opened._roll(0)
        return opened

    # --- positions ------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The first offset still on disk."""
        return self._segments[0].base_offset

    @property
    def end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._segments[-1].end_offset

    @property
    def last_epoch(self) -> int:
        """The Raft epoch of the last batch (-1 when the log has never held one)."""
        return self._last_epoch

    def segment_paths(self) -> list[Path]:
        return [s.path for s in self._segments]

    # --- writing --------------------------------------------------------------

    def append(self, records: Sequence[Message], *, epoch: int, timestamp: int) -> MetadataBatch:
        """Write `records` as one batch and fsync; returns the batch as stored."""
        if epoch < self._last_epoch:
            raise ValueError(f"epoch {epoch} is older than the log's {self._last_epoch}")
        active = self._segments[-1]
        if active.size >= self._segment_bytes and active.size > 0:
            active = self._roll(active.end_offset)
        data = encode_batch(
            records, base_offset=active.end_offset, epoch=epoch, timestamp=timestamp
        )
        fd = self._active_fd()
        try:
            if self._tail_dirty:
                os.ftruncate(fd, active.size)
                self._tail_dirty = False
            _write_at(fd, data, active.size)
            os.fsync(fd)
        except BaseException:
            self._cut_back(fd, active.size)
            raise
        base = active.end_offset
        active.size += len(data)
        active.end_offset += len(records)
        self._last_epoch = epoch
        return MetadataBatch(
            base, base + len(records) - 1, epoch, timestamp, list(records), False, len(data)
        )

    def _cut_back(self, fd: int, size: int) -> None:
        """Restore the last good length after a failed write (no flush: nothing is buffered)."""
        try:
            os.ftruncate(fd, size)
        except OSError as exc:
            self._tail_dirty = True  # retried before the next write; recovery trims it on open
            log.error("metadata log: cannot cut back a failed write yet: %s", exc)

    def _active_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._segments[-1].path, os.O_RDWR)
        return self._fd

    def _roll(self, base_offset: int) -> _Segment:
        """Start a new, empty active segment at `base_offset` (nothing left behind on failure)."""
        self._close_file()
        path = self.directory / segment_name(base_offset)
        try:
            with open(path, "xb") as handle:
                os.fsync(handle.fileno())
            fsync_dir(self.directory)
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        segment = _Segment(base_offset, base_offset, 0, path)
        self._segments.append(segment)
        return segment

    # --- reading --------------------------------------------------------------

    def read(self, start_offset: int = 0) -> Iterator[MetadataBatch]:
        """Batches holding any offset >= `start_offset`, in order (data and control)."""
        for segment in self._segments:
            if segment.end_offset <= start_offset:
                continue
            data = segment.path.read_bytes()[: segment.size]
            for header, view in iter_batches(data, allow_partial=False):
                if header.last_offset >= start_offset:
                    yield decode_batch(view)

    # --- retention ------------------------------------------------------------

    def delete_before(self, offset: int) -> list[Path]:
        """Delete whole segments below `offset` (never the active one); returns them."""
        gone: list[Path] = []
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            segment = self._segments.pop(0)
            segment.path.unlink()
            gone.append(segment.path)
        if gone:
            fsync_dir(self.directory)
        return gone

    def reset(self, offset: int) -> None:
        """Drop every segment and continue at `offset` (when a snapshot is ahead of the log)."""
        self._close_file()
        for segment in self._segments:
            segment.path.unlink()
        self._segments = []
        self._roll(offset)

    def _close_file(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            if self._tail_dirty:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, self._segments[-1].size)
                self._tail_dirty = False  # or recovery trims it on the next open
            os.close(fd)

    def close(self) -> None:
        self._close_file()


def _write_at(fd: int, data: bytes | bytearray, position: int) -> None:
    """Write all of `data` at `position` with unbuffered pwrite calls."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


def _parse_base(path: Path) -> int:
    stem = path.name[: -len(SEGMENT_SUFFIX)]
    if len(stem) != 20 or not stem.isdigit():
        raise MetadataError(f"unexpected file {path.name} in the metadata log directory")
    return int(stem)


def _recover(path: Path, base: int, *, last: bool) -> tuple[_Segment, int]:
    """Scan one segment: valid size, end offset and last epoch; truncate a torn tail."""
    data = path.read_bytes()
    pos, end_offset, epoch = 0, base, -1
    problem = ""
    batches = iter_batches(data, allow_partial=True)
    try:
        for header, view in batches:
            validate_batch(view)
            if header.base_offset != end_offset:
                problem = f"batch at {header.base_offset} where {end_offset} was expected"
                break
            end_offset, epoch = header.next_offset, header.partition_leader_epoch
            pos = batches.consumed
        else:
            if batches.partial:
                problem = f"incomplete batch ({batches.remaining} bytes)"
    except ProtocolError as exc:
        problem = str(exc)
    if problem:
        if not last:
            raise MetadataError(f"{path.name}: corrupt at byte {pos}: {problem}")
        log.warning("metadata log %s: truncating torn tail at byte %d: %s", path, pos, problem)
        with open(path, "r+b") as handle:
            handle.truncate(pos)
            os.fsync(handle.fileno())
    return _Segment(base, end_offset, pos, path), epoch
