"""What the log hands back: append outcomes, zero-copy read slices, segment listings."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path

from strom.storage import disk
from strom.storage.fileio import SegmentFile
from strom.storage.log.txn_index import AbortedTxn


@dataclass(frozen=True)
class AppendResult:
    """ProduceResponse fields for one partition. `duplicate`: a retried batch, not rewritten."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True)
class ReadResult:
    """A byte range of one segment file holding whole batches, plus the log's bounds.

    For zero-copy, hand `fd`, `position` and `size` to `os.sendfile`; otherwise
    call `read_bytes()`. The fd stays valid while this object lives, even if the
    segment or the whole partition is deleted meanwhile; only a clean shutdown
    closes it outright (check `file.closed` before a late sendfile).
    """

    file: SegmentFile | None
    position: int
    size: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int
    aborted_transactions: list[AbortedTxn] | None = None
    """read_committed reads: the aborted transactions overlapping the batches read."""

    @property
    def fd(self) -> int:
        return -1 if self.file is None else self.file.fd

    @property
    def path(self) -> Path | None:
        return None if self.file is None else self.file.path

    def read_bytes(self) -> bytes:
        """Copy the range into memory (one pread per call, looping on short reads)."""
        if self.file is None or self.size == 0:
            return b""
        if self.file.closed:
            raise OSError(errno.EBADF, f"{self.file.path} was closed at shutdown")
        chunks, pos, left = [], self.position, self.size
        while left:
            chunk = disk.pread(self.file.fd, left, pos)
            if not chunk:
                break  # the file was truncated under us (replication truncation)
            chunks.append(chunk)
            pos += len(chunk)
            left -= len(chunk)
        return b"".join(chunks)


@dataclass(frozen=True)
class SegmentInfo:
    """One segment, for DescribeLogDirs and operators."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp: int
    path: Path
