"""Kafka's plain-text checkpoint files, written atomically.

Layout (UTF-8, '\\n' line ends), identical to Kafka's CheckpointFile::

    0                  version
    N                  number of entries
    <entry line> x N   space-separated fields

Entry lines: `topic partition offset` for recovery-point-offset-checkpoint and
log-start-offset-checkpoint (one file per log dir), `epoch startOffset` for a
partition's leader-epoch-checkpoint.

Crash recovery: a file is replaced whole by `strom.storage.durable.atomic_replace`
(`<name>.tmp`, fsync, rename, fsync the directory), so a reader sees the old or
the new file, never a mix; a leftover `.tmp` is a write that did not finish and
is ignored (deleted on load in a partition directory). A malformed file (one
written with `sync=False` and torn by a power loss, say) raises `CheckpointError`
and the caller falls back (scan more, or rebuild) rather than trusting it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from strom.storage import disk
from strom.storage.durable import atomic_replace

VERSION = 0


class CheckpointError(Exception):
    """A checkpoint file exists but does not parse."""


def write_checkpoint(path: Path, entries: Iterable[Iterable[object]], *, sync: bool = True) -> None:
    """Write a version-0 checkpoint of space-separated entries (`sync`: durable on return)."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    atomic_replace(path, text.encode(), sync=sync)


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """Entries of a checkpoint (None if the file is absent); CheckpointError if malformed."""
    try:
        text = disk.read_file(path).decode()
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
