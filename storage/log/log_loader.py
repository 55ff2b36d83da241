"""Opening a partition directory: find segments, recover what may be torn, rebuild state.

Partition directory `<topic>-<partition>/`::

    00000000000000000000.log          segments (see strom.storage.log.segment)
    00000000000000000000.index        offset index (see strom.storage.log.index)
    00000000000000000000.timeindex    time index
    00000000000000000000.txnindex     aborted transactions (strom.storage.log.txn_index), if any
    00000000000000001234.snapshot     producer state at offset 1234 (strom.storage.log.producer_state)
    leader-epoch-checkpoint           epoch history (strom.storage.log.epoch)

Recovery rules, applied in order:

0. An interrupted cleaner swap is completed or rolled back (strom.storage.log.swap):
   a committed `<base>.log.swap` replaces the segments it covers; uncommitted
   `*.cleaned` files and stray `*.swap` indexes are deleted.
1. Leftover `*.tmp` files (interrupted atomic writes), `*.deleted` files and
   index files without a `.log` are deleted.
2. After an unclean shutdown every segment that may hold bytes past the
   recovery point (the segment containing it and all later ones) is recovered:
   scanned batch by batch with CRC checks and truncated at the first bad batch;
   if that happens before the last segment, all later segments are deleted,
   since the log must stay contiguous. Its indexes are rewritten.
3. Any other segment whose index files fail the sanity check (length not a
   multiple of the entry size, entries out of order or out of bounds) is
   recovered the same way; otherwise only its tail (after the last offset-index
   entry) is scanned, and indexed, so an index that lags the log is extended.
   Rebuilt or extended indexes are written out before the log opens. Only the
   last segment keeps its `.log` open (strom.storage.log.segment).
4. The log start offset is max(checkpointed value, first segment's base), never
   past the log end; the recovery point becomes the log end after a clean
   shutdown and stays put (clamped to the log end) otherwise.
5. The leader-epoch file is cut back to the log end offset and log start; after an
   unclean stop the epochs of the batches past the recovery point are added (appends
   save the file without fsync); if it is missing or unreadable it is rebuilt from
   the batch headers.
6. Producer state comes from the newest valid snapshot at or below the log end
   (later ones are deleted), then the batches after it are replayed (headers, and the
   marker of each control batch).
7. The aborted-transaction index of every segment rescanned by rule 2, of a segment
   a cleaner swap installed (rule 0), and of one whose `.txnindex` fails its sanity
   check, is rebuilt, with every later segment's: their entries are dropped and rule 6
   starts from a snapshot at or below the first such segment, adding an entry to the
   segment holding each ABORT marker it replays there (a transaction may begin in an
   earlier segment, which the snapshot's open transactions remember).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from strom.storage import disk
from strom.storage.durable import TMP_SUFFIX
from strom.storage.fileio import scan_headers
from strom.storage.log.epoch import FILE_NAME as EPOCH_FILE
from strom.storage.log.epoch import LeaderEpochCache
from strom.storage.log.log_config import LogConfig
from strom.storage.log.producer_state import ProducerStateManager
from strom.storage.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from strom.storage.log.swap import complete_swaps
from strom.storage.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from strom.storage.log_errors import CorruptLogError
from strom.wire.errors import ProtocolError
from strom.wire.records import BatchHeader, EndTxnMarker, decode_batch, parse_end_txn_marker

log = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    epochs: LeaderEpochCache
    producers: ProducerStateManager
    recovered_bytes_dropped: int


def new_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    now_ms: int,
    jitter_ms: int = 0,
    *,
    active: bool = True,
) -> LogSegment:
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        now_ms=now_ms,
        roll_jitter_ms=jitter_ms,
        active=active,
    )


def iter_headers_from(segments: list[LogSegment], offset: int) -> Iterator[BatchHeader]:
    """Headers of every batch whose last offset is >= `offset`, across segments."""
    for segment in segments:
        if segment.next_offset <= offset:
            continue
        found = segment.find_batch(offset)
        if found is None:
            continue
        file = segment.open_file()  # held while the scan uses its fd
        for _, header in scan_headers(file.fd, found[0], segment.size):
            yield header


def iter_batches_from(
    segments: list[LogSegment], offset: int
) -> Iterator[tuple[LogSegment, BatchHeader, EndTxnMarker | None]]:
    """(segment, header, marker) of every batch whose last offset is >= `offset`: producer
    state's replay. `marker` is a control batch's end-transaction marker (None for data
    batches, and for a control batch the cleaner emptied)."""
    for segment in segments:
        if segment.next_offset <= offset:
            continue
        found = segment.find_batch(offset)
        if found is None:
            continue
        file = segment.open_file()  # held while the scan uses its fd
        for pos, header in scan_headers(file.fd, found[0], segment.size):
            marker = None
            if header.is_control and header.record_count > 0:
                marker = read_marker(disk.pread(file.fd, header.size, pos), header)
            yield segment, header, marker


def read_marker(batch: bytes | bytearray | memoryview, header: BatchHeader) -> EndTxnMarker | None:
    """The end-transaction marker a control batch holds (None if it holds none, or none
    that parses: Kafka ignores such a batch's contents too)."""
    try:
        records = decode_batch(batch, header, check_crc=False)[1]
        return parse_end_txn_marker(records[0]) if records else None
    except (ProtocolError, ValueError):
        return None


def load_partition(
    directory: Path,
    config: LogConfig,
    *,
    clean: bool,
    recovery_point: int,
    log_start_offset: int | None,
    now_ms: int,
    high_watermark: int | None = None,
) -> LoadedLog:
    """Open (and if needed recover) the log in `directory`; see the module rules.
    `high_watermark`: the replication checkpoint's (None: the log end), below which a
    replayed transaction's marker no longer holds the last stable offset down."""
    started = time.monotonic()
    swapped = complete_swaps(directory)
    _remove_leftovers(directory)
    bases = sorted(
        int(p.stem) for p in disk.glob(directory, f"*{LOG_SUFFIX}") if p.stem.isdigit()
    )
    segments = [new_segment(directory, base, config, now_ms, active=False) for base in bases]
    if not segments:
        segments = [new_segment(directory, log_start_offset or 0, config, now_ms)]
    dropped, rescanned = _recover_segments(directory, segments, clean, recovery_point)
    segments[-1].set_active(True)
    log_end = segments[-1].next_offset
    start = min(max(log_start_offset or 0, segments[0].base_offset), log_end)
    recovery_point = log_end if clean else min(recovery_point, log_end)

    epochs = LeaderEpochCache(directory / EPOCH_FILE)
    if epochs.load():
        changed = epochs.truncate_from_end(log_end) | epochs.truncate_from_start(start)
        if not clean:
            # Appends save the file unsynced: epochs first written past the last flush may
            # be missing, and the rescanned tail's batches carry them.
            for header in iter_headers_from(segments, recovery_point):
                if header.base_offset >= recovery_point:
                    changed |= epochs.assign(header.partition_leader_epoch, header.base_offset)
    else:
        for header in iter_headers_from(segments, segments[0].base_offset):
            epochs.assign(header.partition_leader_epoch, header.base_offset)
        epochs.truncate_from_start(start)
        changed = True
    if changed:
        epochs.save(sync=False)  # derived from the log again if lost; the next flush syncs it

    rebuild_from = _txn_index_rebuild_from(segments, set(swapped), rescanned)
    if rebuild_from is not None:
        for segment in segments:
            if segment.base_offset >= rebuild_from:
                segment.txn_index.reset()
    producers = ProducerStateManager(directory)
    producers.delete_snapshots(above=log_end)
    snapshot = producers.load_latest_snapshot(
        log_end if rebuild_from is None else min(log_end, rebuild_from)
    )
    replay_from = max(snapshot if snapshot is not None else 0, segments[0].base_offset)
    hw = log_end if high_watermark is None else max(min(high_watermark, log_end), start)
    replayed = 0
    for segment, header, marker in iter_batches_from(segments, replay_from):
        if header.base_offset >= replay_from:
            ended = producers.replay(header, marker, hw)
            replayed += 1
            if (
                ended is not None
                and rebuild_from is not None
                and header.base_offset >= rebuild_from
            ):
                txn, lso = ended
                if txn.aborted:
                    segment.txn_index.append(
                        AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                    )
    if rebuild_from is not None:
        for segment in segments:
            if segment.base_offset >= rebuild_from:
                segment.txn_index.save()
    log.log(
        logging.INFO if dropped or not clean else logging.DEBUG,
        "loaded %s: %d segments, offsets [%d, %d), recovery point %d, %d bytes truncated,"
        " producer snapshot %s + %d batches replayed, %.3fs",
        directory.name,
        len(segments),
        start,
        log_end,
        recovery_point,
        dropped,
        snapshot,
        replayed,
        time.monotonic() - started,
    )
    return LoadedLog(segments, start, recovery_point, epochs, producers, dropped)


def _remove_leftovers(directory: Path) -> None:
    logs = {p.stem for p in disk.glob(directory, f"*{LOG_SUFFIX}")}
    for path in [directory / name for name in disk.listdir(directory)]:
        orphan = (
            path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            and path.stem not in logs
        )
        if path.name.endswith(TMP_SUFFIX) or orphan or path.suffix == ".deleted":
            log.info("removing leftover file %s", path)
            with contextlib.suppress(FileNotFoundError):
                disk.unlink(path)


def _recover_segments(
    directory: Path, segments: list[LogSegment], clean: bool, recovery_point: int
) -> tuple[int, int | None]:
    """Recover or tail-load each segment; drops segments after a truncated one. Bytes
    dropped, and the base of the first segment rescanned as past the recovery point."""
    dropped = 0
    rescanned: int | None = None
    i = 0
    while i < len(segments):
        segment = segments[i]
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        why = None
        if not clean and (following is None or following > recovery_point):
            why = "past the recovery point"
            if rescanned is None:
                rescanned = segment.base_offset
        elif segment.size and (segment.offset_index.was_missing or segment.time_index.was_missing):
            why = "missing index"
        elif not (segment.offset_index.sane(segment.size) and segment.time_index.sane()):
            why = "corrupt index"
        else:
            last_entries = segment.offset_index.last_entry(), segment.time_index.last()
            try:
                segment.load_tail()
                if not _indexes_below_end(segment, *last_entries):
                    why = "index entries past the segment's end"
            except CorruptLogError as exc:
                why = str(exc)
        if why is not None:
            log.info("%s: recovering segment %d (%s)", directory.name, segment.base_offset, why)
            lost = segment.recover()
            dropped += lost
            if following is not None and not lost:
                segment.seal()
            if lost and following is not None:
                log.warning(
                    "%s: segment %d truncated by %d bytes; dropping %d later segments",
                    directory.name,
                    segment.base_offset,
                    lost,
                    len(segments) - i - 1,
                )
                for later in segments[i + 1 :]:
                    dropped += later.size
                    later.delete()
                del segments[i + 1 :]
        segment.write_indexes()  # what recovery rebuilt or the tail scan added
        i += 1
    return dropped, rescanned


def _txn_index_rebuild_from(
    segments: list[LogSegment], swapped: set[int], rescanned: int | None
) -> int | None:
    """Rule 7: the base of the first segment whose aborted-transaction index must be rebuilt
    (None: every one is trusted)."""
    for segment in segments:
        base = segment.base_offset
        if (rescanned is not None and base >= rescanned) or base in swapped:
            return base
        if not segment.txn_index.sane(segment.next_offset):
            log.info(
                "%s: rebuilding the transaction index of segment %d", segment.path.parent.name, base
            )
            return base
    return None


def _indexes_below_end(
    segment: LogSegment, offset_entry: tuple[int, int] | None, time_entry: tuple[int, int] | None
) -> bool:
    """Index entries (the files' last ones, as loaded) may only name offsets the segment holds."""
    if offset_entry is not None and segment.base_offset + offset_entry[0] >= segment.next_offset:
        return False
    return time_entry is None or time_entry[1] < segment.next_offset
