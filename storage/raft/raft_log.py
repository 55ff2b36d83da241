"""The Raft log and its snapshots on disk: `<metadata.log.dir>/__cluster_metadata-0/`.

Segments, as in KRaft: files named by the offset of their
first entry, `<20-digit base offset>.log`, holding v2 RecordBatches back to back. One batch per run
of entries that share an epoch and kind; `partitionLeaderEpoch` is the Raft epoch; each entry is
one record (key null, value = the entry's bytes) at its own offset; the entry a new leader writes
is a control batch whose record key is the LEADER_CHANGE control key. `encode_entries` and
`decode_entries` are that mapping; Fetch responses carry the same batches.

Snapshots: `<20-digit end offset>-<10-digit epoch>.checkpoint` (Kafka's naming), laid out as::

    magic     4 bytes   b"SRSN"
    crc       uint32    CRC-32C of the data
    length    uint64    length of the data
    data                the state machine's snapshot, opaque here

Cut records: a truncation inside a batch (a follower batches what it fetches its own way, so
its batch boundaries differ from the leader's) cuts the segment at the start of that batch and
writes the kept part again. So that a crash between the two cannot lose the kept entries, it
first stores what it is about to do in `<20-digit segment base offset>.cut`::

    magic     4 bytes   b"SRCT"
    crc       uint32    CRC-32C of what follows
    position  uint64    where the segment is cut (the start of the batch)
    kept                the kept entries as v2 batches, written at `position` after the cut

Durability: every change returns after fsync (and a directory fsync when files come or go).
`truncate_to` deletes the later segments and cuts the segment at the batch holding the offset;
inside a batch, the cut record is made durable first (written to `<name>.part`, fsynced and
renamed: `strom.storage.durable.atomic_replace`), the kept part written and fsynced after the
cut, and the record deleted last. A snapshot is written to `<name>.part`, fsynced and renamed;
older snapshots are deleted after the new one is durable.

A failed append (ENOSPC, EIO) never stays behind: batches are written with unbuffered `pwrite`
at the segment's last good length, and on a failed write or fsync the file is cut back to that
length (`ftruncate`; nothing is buffered, so nothing of the failed batch can reach the file
later) before the OSError propagates. If even that cut fails, the next append repeats it
before writing, and a crash meanwhile leaves a torn tail that recovery removes. A failed roll
deletes the new segment. So the log is usable again the moment the disk is.

Crash recovery (`RaftLogDir.open`): each segment is scanned and each batch's length and CRC
checked. In the last segment, the first torn or corrupt batch and everything after it is an
append that was never acknowledged and is cut off. The same damage in an earlier segment would be
loss of acknowledged entries: opening fails with RaftLogError. A cut record found first is a
truncation a crash interrupted at some step: it is done again from the start (segments after its
segment deleted, the segment cut at `position`, the kept bytes written there, fsynced, the record
deleted), which lands on the same log whatever step the crash came at; a damaged cut record
cannot come from a crash (it is renamed into place whole) and fails the open. Leftover `.part`
files are deleted; the newest snapshot whose CRC holds is used (an older one if the newest is
damaged).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from strom.storage import disk
from strom.storage.durable import atomic_replace, fsync_dir
from strom.storage.raft.raft_store import Entry, SnapshotId
from strom.wire.errors import ProtocolError
from strom.wire.records import Record, build_batch, decode_batch, iter_batches, validate_batch
from strom.wire.records.record import ControlType, control_key

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".log"
SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".part"
DEFAULT_SEGMENT_BYTES = 1 << 30
SNAPSHOT_MAGIC = b"SRSN"
_SNAPSHOT_HEADER = struct.Struct(">4sIQ")
CUT_SUFFIX = ".cut"
CUT_MAGIC = b"SRCT"
_CUT_HEADER = struct.Struct(">4sI")
_CUT_POSITION = struct.Struct(">Q")


class RaftLogError(Exception):
    """The Raft log or a snapshot on disk is damaged beyond a torn tail."""


# --- entries as record batches ------------------------------------------------------------


def encode_entries(entries: tuple[Entry, ...] | list[Entry]) -> bytes:
    """Entries as concatenated v2 batches (see the module docstring)."""
    out = bytearray()
    run: list[Entry] = []
    for entry in entries:
        if run and (run[0].epoch != entry.epoch or run[0].control != entry.control):
            out += _batch(run)
            run = []
        run.append(entry)
    if run:
        out += _batch(run)
    return bytes(out)


class EncodedEntries:
    """`encode_entries` that remembers its last few answers: a Raft leader sends the same
    entries to every observer parked at the log end (hundreds of brokers after each metadata
    change), and encoding them is most of its work. A run of entries is identified by its
    first and last entry objects, not by their offsets and epochs: a leader that could not
    write its own entries drops them and appends others at the same offsets in the same
    epoch. Entries only leave a log from its end, so the same first and last objects hold
    the same entries in between."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._cache: dict[tuple[int, int], tuple[Entry, Entry, bytes]] = {}

    def __call__(self, entries: tuple[Entry, ...] | list[Entry]) -> bytes:
        if not entries:
            return b""
        first, last = entries[0], entries[-1]
        key = (first.offset, last.offset)
        found = self._cache.get(key)
        if found is not None and found[0] is first and found[1] is last:
            return found[2]
        encoded = encode_entries(entries)
        self._cache.pop(key, None)
        if len(self._cache) >= self._size:
            del self._cache[next(iter(self._cache))]  # the oldest
        self._cache[key] = (first, last, encoded)
        return encoded


def _batch(run: list[Entry]) -> bytearray:
    control = run[0].control
    key = control_key(ControlType.LEADER_CHANGE) if control else None
    return build_batch(
        [Record(key, entry.data, (), 0) for entry in run],
        base_offset=run[0].offset,
        partition_leader_epoch=run[0].epoch,
        control=control,
    )


def decode_entries(data: bytes | bytearray | memoryview | None) -> list[Entry]:
    """The entries in concatenated batches; a partial batch at the end is ignored.

    ProtocolError if a whole batch is malformed or fails its CRC.
    """
    if not data:
        return []
    entries: list[Entry] = []
    for header, view in iter_batches(data):
        header, records = decode_batch(view, header)
        for record in records:
            entries.append(
                Entry(
                    record.offset,
                    header.partition_leader_epoch,
                    bytes(record.value or b""),
                    header.is_control,
                )
            )
    return entries


# --- the directory ------------------------------------------------------------------------


@dataclass
class _Segment:
    base_offset: int
    path: Path
    size: int


@dataclass
class _Batch:
    segment: _Segment
    position: int
    base_offset: int
    next_offset: int


def segment_name(base_offset: int) -> str:
    """`<20-digit base offset>.log`: a segment's file name."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def _cut_record_name(segment_base_offset: int) -> str:
    return f"{segment_base_offset:020d}{CUT_SUFFIX}"


def snapshot_name(snapshot: SnapshotId) -> str:
    """`<20-digit end offset>-<10-digit epoch>.checkpoint`: a snapshot's file name (Kafka's)."""
    return f"{snapshot.end_offset:020d}-{snapshot.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> SnapshotId | None:
    """The snapshot id a file name gives (None: not a snapshot's name)."""
    stem = name[: -len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
    offset, _, epoch = stem.partition("-")
    if len(offset) != 20 or len(epoch) != 10 or not (offset + epoch).isdigit():
        return None
    return SnapshotId(int(offset), int(epoch))


class RaftLogDir:
    """The segments and snapshots of one Raft log. Use `RaftLogDir.open`."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.directory = directory
        self._segment_bytes = segment_bytes
        self._segments: list[_Segment] = []
        self._batches: list[_Batch] = []
        self._end = 0
        self._tail_dirty = False
        """A failed append may have left bytes past the active segment's size."""

    @classmethod
    def open(cls, directory: Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> RaftLogDir:
        """Open (creating if need be) and recover the log in `directory`."""
        if not disk.is_dir(directory):
            disk.makedirs(directory)
            fsync_dir(directory.parent)
        opened = cls(directory, segment_bytes)
        for leftover in disk.glob(directory, f"*{PART_SUFFIX}"):
            disk.unlink(leftover)
        for record in disk.glob(directory, f"*{CUT_SUFFIX}"):
            opened._finish_cut(record)
        names = disk.glob(directory, f"*{SEGMENT_SUFFIX}")
        for index, path in enumerate(names):
            opened._recover(path, last=index == len(names) - 1)
        if not opened._segments:
            opened._roll(0)
        return opened

    def _finish_cut(self, record: Path) -> None:
        """Redo the truncation a crash interrupted (see the module docstring)."""
        raw = disk.read_file(record)
        stem = record.name[: -len(CUT_SUFFIX)]
        segment = self.directory / (stem + SEGMENT_SUFFIX)
        magic, crc = _CUT_HEADER.unpack_from(raw) if len(raw) >= _CUT_HEADER.size else (b"", 0)
        body = raw[_CUT_HEADER.size :]
        if (
            magic != CUT_MAGIC
            or len(body) < _CUT_POSITION.size
            or crc32c.crc32c(body) != crc
            or len(stem) != 20
            or not stem.isdigit()
            or not disk.exists(segment)
        ):
            raise RaftLogError(
                f"{record} is damaged or names no segment: the truncation it records cannot be "
                "finished; restore the directory or reformat this node"
            )
        log.warning("raft log %s: finishing a truncation a crash interrupted", segment)
        for later in disk.glob(self.directory, f"*{SEGMENT_SUFFIX}"):
            if later.name > segment.name:
                disk.unlink(later)
        fsync_dir(self.directory)
        (position,) = _CUT_POSITION.unpack_from(body)
        fd = disk.open(segment, os.O_RDWR)
        try:
            disk.ftruncate(fd, position)
            disk.pwrite_all(fd, body[_CUT_POSITION.size :], position)
            disk.fsync(fd)
        finally:
            disk.close(fd)
        disk.unlink(record)
        fsync_dir(self.directory)

    def _recover(self, path: Path, *, last: bool) -> None:
        stem = path.name[: -len(SEGMENT_SUFFIX)]
        if len(stem) != 20 or not stem.isdigit():
            raise RaftLogError(f"unexpected file {path.name} in {self.directory}")
        base = int(stem)
        if self._segments and base != self._end:
            raise RaftLogError(f"{path.name}: starts at {base}, expected {self._end}")
        self._end = base
        data = disk.read_file(path)
        segment = _Segment(base, path, 0)
        batches = iter_batches(data, allow_partial=True)
        problem = ""
        try:
            for header, view in batches:
                validate_batch(view)
                if header.base_offset != self._end:
                    problem = f"batch at {header.base_offset} where {self._end} was expected"
                    break
                self._batches.append(_Batch(segment, segment.size, self._end, header.next_offset))
                self._end = header.next_offset
                segment.size = batches.consumed
            else:
                if batches.partial:
                    problem = f"incomplete batch ({batches.remaining} bytes)"
        except ProtocolError as exc:
            problem = str(exc)
        if problem:
            if not last:
                raise RaftLogError(f"{path}: corrupt at byte {segment.size}: {problem}")
            log.warning(
                "raft log %s: cutting torn tail at byte %d: %s", path, segment.size, problem
            )
            disk.truncate_synced(path, segment.size)
        self._segments.append(segment)

    # --- positions and reading --------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def end_offset(self) -> int:
        return self._end

    def read_all(self) -> list[Entry]:
        """Every entry from the log start, in order."""
        entries: list[Entry] = []
        for data in self.segment_data():
            entries.extend(decode_entries(data))
        return entries

    def segment_data(self) -> Iterator[bytes]:
        """Each segment's batches (whole, recovered), from the log start."""
        for segment in self._segments:
            yield disk.read_range(segment.path, 0, segment.size)

    def batches(self) -> Iterator[memoryview]:
        """Every batch from the log start, whole, in order."""
        for data in self.segment_data():
            for _header, view in iter_batches(data, allow_partial=False):
                yield view

    # --- writing ------------------------------------------------------------------------------

    def append(self, entries: list[Entry]) -> None:
        """Write `entries` (starting at the end offset) and fsync."""
        if not entries:
            return
        if entries[0].offset != self._end:
            raise ValueError(f"append at {entries[0].offset}, the log ends at {self._end}")
        segment = self._segments[-1]
        if segment.size >= self._segment_bytes:
            segment = self._roll(self._end)
        data = encode_entries(entries)
        self._write_at(segment, segment.size, data)
        self._written(segment, data)

    def _written(self, segment: _Segment, data: bytes) -> None:
        """`data` (whole batches) now ends `segment`: index its batches, move the end."""
        position = segment.size
        for header, _view in iter_batches(data, allow_partial=False):
            self._batches.append(_Batch(segment, position, header.base_offset, header.next_offset))
            position += header.size
            self._end = header.next_offset
        segment.size = position

    def _write_at(self, segment: _Segment, position: int, data: bytes) -> None:
        """Write and fsync `data` at `position`, which becomes the segment's end; on failure cut
        the file back to `position` (see the module docstring) and raise."""
        fd = disk.open(segment.path, os.O_RDWR)
        try:
            if self._tail_dirty:
                disk.ftruncate(fd, position)
                self._tail_dirty = False
            disk.pwrite_all(fd, data, position)
            disk.fsync(fd)
        except BaseException:
            try:
                disk.ftruncate(fd, position)
            except OSError as exc:
                self._tail_dirty = True  # retried before the next write; recovery trims it
                log.error("raft log %s: cannot cut back a failed write yet: %s", segment.path, exc)
            raise
        finally:
            disk.close(fd)

    def _roll(self, base_offset: int) -> _Segment:
        """Start a new, empty active segment at `base_offset` (nothing left behind on failure)."""
        path = self.directory / segment_name(base_offset)
        try:
            fd = disk.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                disk.fsync(fd)
            finally:
                disk.close(fd)
            fsync_dir(self.directory)
        except BaseException:
            with contextlib.suppress(OSError):
                disk.unlink(path)
            raise
        segment = _Segment(base_offset, path, 0)
        self._segments.append(segment)
        return segment

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at `offset` or above, durably."""
        if offset >= self._end:
            return
        if offset < self.start_offset:
            raise ValueError(f"truncate to {offset} below the log start {self.start_offset}")
        index = next(i for i, b in enumerate(self._batches) if b.next_offset > offset)
        cut = self._batches[index]
        segment = cut.segment
        record: Path | None = None
        kept = b""
        if cut.base_offset < offset:
            # inside a batch: its kept part is written again after the cut; the cut record
            # lets recovery finish the job if a crash comes in between
            tail = disk.read_range(segment.path, cut.position, segment.size - cut.position)
            kept = encode_entries([e for e in decode_entries(tail) if e.offset < offset])
            record = self.directory / _cut_record_name(segment.base_offset)
            body = _CUT_POSITION.pack(cut.position) + kept
            header = _CUT_HEADER.pack(CUT_MAGIC, crc32c.crc32c(body))
            atomic_replace(record, header + body, temp_suffix=PART_SUFFIX)
        del self._batches[index:]
        # segments after the one holding the cut go whole
        while self._segments[-1] is not segment:
            disk.unlink(self._segments.pop().path)
        fsync_dir(self.directory)
        disk.truncate_synced(segment.path, cut.position)
        self._tail_dirty = False
        segment.size = cut.position
        self._end = cut.base_offset
        if record is not None:
            self._write_at(segment, cut.position, kept)
            self._written(segment, kept)
            disk.unlink(record)
            fsync_dir(self.directory)

    def reset(self, offset: int) -> None:
        """Drop every segment and continue, empty, at `offset` (a snapshot replaced the log)."""
        for segment in self._segments:
            disk.unlink(segment.path)
        self._segments, self._batches, self._end = [], [], offset
        self._tail_dirty = False
        self._roll(offset)

    def delete_before(self, offset: int) -> None:
        """Delete whole segments that end at or below `offset` (never the active one)."""
        gone = False
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            segment = self._segments.pop(0)
            disk.unlink(segment.path)
            self._batches = [b for b in self._batches if b.segment is not segment]
            gone = True
        if gone:
            fsync_dir(self.directory)

    # --- snapshots ----------------------------------------------------------------------------

    def write_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """Store `snapshot` durably, then delete the older ones."""
        header = _SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, crc32c.crc32c(data), len(data))
        path = self.directory / snapshot_name(snapshot)
        atomic_replace(path, header + data, temp_suffix=PART_SUFFIX)
        for older in disk.glob(self.directory, f"*{SNAPSHOT_SUFFIX}"):
            if older != path:
                disk.unlink(older)
        fsync_dir(self.directory)

    def latest_snapshot(self) -> tuple[SnapshotId, bytes] | None:
        """The newest intact snapshot, if any."""
        found: list[tuple[SnapshotId, Path]] = []
        for path in disk.glob(self.directory, f"*{SNAPSHOT_SUFFIX}"):
            snapshot = parse_snapshot_name(path.name)
            if snapshot is None:
                raise RaftLogError(f"unexpected file {path.name} in {self.directory}")
            found.append((snapshot, path))
        for snapshot, path in sorted(found, reverse=True):
            raw = disk.read_file(path)
            with contextlib.suppress(struct.error):
                magic, crc, length = _SNAPSHOT_HEADER.unpack_from(raw)
                data = raw[_SNAPSHOT_HEADER.size :]
                if magic == SNAPSHOT_MAGIC and len(data) == length and crc32c.crc32c(data) == crc:
                    return snapshot, data
            log.warning("raft snapshot %s is damaged; trying an older one", path)
        if found:
            raise RaftLogError(
                f"every snapshot in {self.directory} is damaged; restore one or reformat this node"
            )
        return None
