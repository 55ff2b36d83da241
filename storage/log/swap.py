"""Crash-safe replacement of segments by a cleaned one: `.cleaned` -> `.swap` -> live.

The cleaner rewrites a group of consecutive closed segments into one new segment
named after the group's first base offset B. On disk, in this order::

    1. write  B.log.cleaned, B.index.cleaned, B.timeindex.cleaned (and B.txnindex.cleaned
       when the cleaned segment keeps an aborted transaction); fsync them
    2. rename B.index.cleaned -> B.index.swap, B.timeindex.cleaned -> B.timeindex.swap,
       (B.txnindex.cleaned -> B.txnindex.swap,) then B.log.cleaned -> B.log.swap; fsync
       the directory                                              <- the commit point
    3. delete the group's old segments, oldest first (`.log`, then its indexes)
    4. rename B.index.swap -> B.index, B.timeindex.swap -> B.timeindex,
       (B.txnindex.swap -> B.txnindex,) then B.log.swap -> B.log; fsync the directory

Offsets are preserved, so B.log.swap holds only offsets the old group held, and
its last batch ends no later than the group did.

Crash recovery (`complete_swaps`, run before anything else opens the directory):

- No `B.log.swap`: the replacement never committed. Every `*.cleaned` file and
  any stray `*.swap` index is deleted; the old segments are intact.
- `B.log.swap` present: the replacement committed. Every `.log` segment whose
  base offset lies in [B, end of the swap's last batch) is deleted with its
  indexes, as are B's index files (old, `.swap` or already renamed: they are
  rebuilt from the log by the loader's missing-index rule; the txnindex, which
  needs producer state, by its rebuild of the bases `complete_swaps` returns),
  and B.log.swap is renamed to B.log. A later old segment of the group that lies wholly past the
  swap's end (all its records were cleaned away) may survive; that is safe,
  its records are older versions or expired tombstones, never the only copy.
- A swap that fails its scan (cannot happen after step 1's fsync, but disks
  lie) is dropped if B.log still exists, since then step 3 had not begun;
  otherwise its valid prefix is kept.

A group whose cleaned output is empty has no swap: its segments are deleted
oldest first, so a crash in between leaves a suffix of them, which only holds
superseded records or tombstones (never a tombstone's older value without it).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from strom.storage import disk
from strom.storage.durable import fsync_dir
from strom.storage.fileio import ValidatingScan
from strom.storage.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_name
from strom.storage.log.txn_index import TXN_INDEX_SUFFIX

CLEANED = ".cleaned"
SWAP = ".swap"
_KINDS = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)
"""Rename order: indexes before the log, so the log's rename is the last step."""
_OPTIONAL = (TXN_INDEX_SUFFIX,)
"""Kinds a cleaned segment may lack (no aborted transaction kept: no `.txnindex`)."""
_INDEXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

log = logging.getLogger(__name__)


def _path(directory: Path, base: int, kind: str, suffix: str = "") -> Path:
    return directory / f"{segment_name(base)}{kind}{suffix}"


def discard(directory: Path, base: int) -> None:
    """Remove every `.cleaned` / `.swap` file of base offset `base` (an abandoned attempt)."""
    for kind in _KINDS:
        for suffix in (CLEANED, SWAP):
            with contextlib.suppress(FileNotFoundError):
                disk.unlink(_path(directory, base, kind, suffix))


def publish(directory: Path, base: int) -> None:
    """Step 2: make the fsynced `.cleaned` files the committed `.swap` set."""
    for kind in _KINDS:
        _rename(_path(directory, base, kind, CLEANED), _path(directory, base, kind, SWAP), kind)
    fsync_dir(directory)


def install(directory: Path, base: int) -> None:
    """Step 4 (after the old segments are gone): give the `.swap` files their live names."""
    for kind in _KINDS:
        _rename(_path(directory, base, kind, SWAP), _path(directory, base, kind), kind)


def _rename(source: Path, target: Path, kind: str) -> None:
    try:
        disk.replace(source, target)
    except FileNotFoundError:
        if kind not in _OPTIONAL:
            raise


def complete_swaps(directory: Path) -> list[int]:
    """Finish or roll back interrupted replacements (see the module docstring); bases swapped."""
    done: list[int] = []
    for swap in disk.glob(directory, f"*{LOG_SUFFIX}{SWAP}"):
        stem = swap.name[: -len(LOG_SUFFIX + SWAP)]
        if not stem.isdigit():
            continue
        base = int(stem)
        if _complete_one(directory, base, swap):
            done.append(base)
    for path in [directory / name for name in disk.listdir(directory)]:
        if path.name.endswith((CLEANED, SWAP)):
            log.info("removing uncommitted cleaner file %s", path)
            with contextlib.suppress(FileNotFoundError):
                disk.unlink(path)
    if done:
        fsync_dir(directory)
    return done


def _complete_one(directory: Path, base: int, swap: Path) -> bool:
    old_base = _path(directory, base, LOG_SUFFIX)
    fd = disk.open(swap, os.O_RDWR)
    try:
        scan = ValidatingScan(fd, 0, disk.fsize(fd), base)
        end = base
        for _, header in scan:
            end = header.next_offset
        if scan.problem is not None:
            if disk.exists(old_base):
                log.warning("%s: dropping a corrupt uncommitted swap (%s)", swap, scan.problem)
                disk.unlink(swap)
                return False
            log.warning("%s: keeping the valid prefix of a swap (%s)", swap, scan.problem)
            disk.ftruncate(fd, scan.valid_end)
            disk.fsync(fd)
    finally:
        disk.close(fd)
    if end == base:
        disk.unlink(swap)
        return False
    for segment in disk.glob(directory, f"*{LOG_SUFFIX}"):
        if segment.stem.isdigit() and base <= int(segment.stem) < end:
            disk.unlink(segment)
            for kind in _INDEXES:
                with contextlib.suppress(FileNotFoundError):
                    disk.unlink(_path(directory, int(segment.stem), kind))
    for kind in _INDEXES:
        for suffix in ("", SWAP):
            with contextlib.suppress(FileNotFoundError):
                disk.unlink(_path(directory, base, kind, suffix))
    disk.replace(swap, old_base)
    log.info(
        "%s: completed an interrupted segment swap at %d (offsets < %d)", directory.name, base, end
    )
    return True
