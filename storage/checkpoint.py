"""Kafka's plain-text checkpoint files, written atomically.

Layout (UTF-8, '\\n' line ends), identical to Kafka's CheckpointFile::

    0                  version
    N                  number of entries
    <entry line> x N   space-separated fields

Entry lines: `topic partition offset` for recovery-point-offset-checkpoint and
log-start-offset-checkpoint (one file per log dir), `epoch startOffset` for a
partition's leader-epoch-checkpoint.

Crash recovery: a writer fills `<name>.tmp`, fsyncs it, renames it over the
file and fsyncs the directory, so a reader sees the old or the new file, never
a mix. A leftover `.tmp` is a write that did not finish and is deleted on load;
a malformed file raises `CheckpointError` and the caller falls back (scan more,
or rebuild) rather than trusting it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

VERSION = 0
TMP_SUFFIX = ".tmp"


class CheckpointError(Exception):
    """A checkpoint file exists but does not parse."""


def fsync_dir(path: Path) -> None:
    """Make a rename or create in `path` durable (no-op where directories can't be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` with `data` via tmp + fsync + rename (+ dir fsync)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def write_checkpoint(path: Path, entries: Iterable[Iterable[object]], *, sync: bool = True) -> None:
    """Write a version-0 checkpoint of space-separated entries (`sync`: durable on return)."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    write_atomic(path, text.encode(), sync=sync)


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """Entries of a checkpoint (None if the file is absent); CheckpointError if malformed."""
    try:
        text = path.read_bytes().decode()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        version, count = int(lines[0]), int(lines[1])
    except (IndexError, ValueError) as exc:
        raise CheckpointError(f"{path}: bad header") from exc
    entries = [line.split(" ") for line in lines[2:]]
    if version != VERSION or count != len(entries) or any(len(e) != fields for e in entries):
        raise CheckpointError(f"{path}: version {version}, {count} entries expected")
    return entries


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """A `topic partition offset` checkpoint as a dict (empty if absent)."""
    entries = read_checkpoint(path, 3)
    try:
        return {(t, int(p)): int(o) for t, p, o in entries or ()}
    except ValueError as exc:
        raise CheckpointError(f"{path}: bad entry") from exc


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    """Write a `topic partition offset` checkpoint, sorted for stable diffs."""
    write_checkpoint(path, ((t, p, o) for (t, p), o in sorted(offsets.items())))
