"""Durable files: replace a file atomically, and fsync a file or a directory.

The one home of "temp file + fsync + rename + fsync the directory", used by the
partition log's checkpoints and snapshots (strom.storage.log), the Raft store's
quorum-state, snapshots and cut records (strom.storage.raft), and `meta.properties`
and `bootstrap.checkpoint` (strom.storage.meta_properties).

`atomic_replace(path, data)` does, in this order::

    1. write  <path><suffix>   (suffix `.tmp` unless the format names its own, e.g.
                                KRaft's `.checkpoint.part`), created or truncated
    2. fsync  the temp file     its bytes are on disk before its name is
    3. rename temp -> path      atomic: `path` is the old file or the new, never a mix
    4. fsync  the directory     the rename itself survives a crash

Crash recovery: a crash during or after step 1 (before 3) leaves `path` as it
was (old contents, or absent) and a temp file that may be empty, torn or whole.
Readers never open a temp file and the next write truncates it (O_TRUNC); where
a directory's files are listed on start-up the leftovers are deleted (a
partition's loader removes `*.tmp`, the Raft log's opening
`*.checkpoint.part`), elsewhere (a data dir's checkpoints, `meta.properties`)
one is simply ignored. A crash after 3 but before 4 leaves the old or the new
file under `path`, both whole (the new one was fsynced), and possibly the
temp file beside it, handled as above. After step 4 the new file is durable.
A failure before the rename deletes the temp file and re-raises; `path` is
untouched.

`sync=False` skips steps 2 and 4 (the event loop must not fsync: the epoch
checkpoint on append, a producer snapshot on roll). The replacement is still
atomic while the machine stays up, but a power loss may leave `path` empty or
torn, so such files carry their own check (a CRC, a parse) and their readers
fall back (an older snapshot, a rebuilt cache) rather than trust them; the
partition's next flush fsyncs them (see `PartitionLog.flush`).

Error policy (one for every caller): every OSError from open, write, fsync,
rename or close propagates. A failed fsync means the data's durability is
unknown and, on Linux, cannot be found out by retrying (the kernel may already
have dropped the dirty pages and cleared the error), so the caller must treat
it as a storage failure: the partition goes offline, the log dir is marked
offline, the metadata write is not acknowledged. This is Kafka's choice too:
its `Utils.flushDir` throws the IOException. Kafka skips directory fsyncs on
Windows and z/OS, where a directory cannot be opened; Strom's storage needs
POSIX (pread, sendfile), so it has no such exemption. The one error a caller
may waive is a directory or file that no longer exists (`missing_ok=True`), and
only where it may have been renamed away for deletion by another thread while
the caller was not holding the log's lock: it is being deleted, so there is
nothing left to make durable (Kafka's `Utils.flushDirIfExists` and
`flushFileIfExists`, used by its log flush for the same race).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from strom.storage import disk
from strom.wire.primitives import Buffer

TMP_SUFFIX = ".tmp"


def atomic_replace(
    path: Path, data: Buffer, *, sync: bool = True, temp_suffix: str = TMP_SUFFIX
) -> None:
    """Replace `path` with `data` (steps 1-4 above; `sync=False`: 1 and 3 only)."""
    temp = path.with_name(path.name + temp_suffix)
    try:
        fd = disk.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            disk.write_all(fd, data)
            if sync:
                disk.fsync(fd)
        finally:
            disk.close(fd)
        disk.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            disk.unlink(temp)
        raise
    if sync:
        fsync_dir(path.parent)


def fsync_dir(path: Path, *, missing_ok: bool = False) -> None:
    """Make the creates, renames and unlinks in directory `path` durable (see the error policy)."""
    _fsync(path, missing_ok)


def fsync_file(path: Path, *, missing_ok: bool = False) -> None:
    """fsync a file by name (one written earlier without sync)."""
    _fsync(path, missing_ok)


def _fsync(path: Path, missing_ok: bool) -> None:
    try:
        disk.fsync_path(path)
    except FileNotFoundError:
        if not missing_ok:
            raise
