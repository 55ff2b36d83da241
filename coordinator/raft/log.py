"""The core's in-memory view of its log: entries, the latest snapshot, epoch boundaries.

The core answers every question about its log from here (last epoch, the end offset of an
epoch, the entries to send) without reading storage; the driver loads it once from the
`RecoveredState` and the core keeps it in step with the writes it asks for. Metadata logs are
small and snapshotted, so holding the entries after the latest snapshot in memory is fine.
"""

from __future__ import annotations

from bisect import bisect_right

from strom.storage.raft.raft_store import Entry, RecoveredState, SnapshotId


class ReplicaLog:
    """Contiguous entries `[start_offset, end_offset)` plus the snapshot below them."""

    def __init__(self, recovered: RecoveredState | None = None) -> None:
        self.snapshot: SnapshotId | None = None
        self.snapshot_data = b""
        self._entries: list[Entry] = []
        self._start = 0
        """Always the snapshot's end offset, or 0 without a snapshot."""
        self._last_range: tuple[tuple[int, int, int, int, int], tuple[Entry, ...]] | None = None
        """`entries_from`'s last (arguments and log end, answer); cleared by every change that
        is not an append."""
        self._epochs: list[tuple[int, int]] = []
        """(epoch, first offset) at every epoch change, oldest first (a leader-epoch cache);
        with a snapshot the first is (snapshot epoch, snapshot end offset)."""
        if recovered is not None:
            self._entries = list(recovered.entries)
            self._start = recovered.log_start
            if recovered.snapshot is not None:
                self.install_snapshot(recovered.snapshot, recovered.snapshot_data)
            else:
                self._rebuild_epochs()

    def _rebuild_epochs(self) -> None:
        self._epochs = []
        if self.snapshot is not None:
            self._epochs.append((self.snapshot.epoch, self._start))
        for entry in self._entries:
            if not self._epochs or self._epochs[-1][0] != entry.epoch:
                self._epochs.append((entry.epoch, entry.offset))

    # --- positions --------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self.snapshot.epoch if self.snapshot is not None else 0

    def entry(self, offset: int) -> Entry | None:
        if self._start <= offset < self.end_offset:
            return self._entries[offset - self._start]
        return None

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the entry at `offset`, or None if not held (the snapshot's last counts)."""
        found = self.entry(offset)
        if found is not None:
            return found.epoch
        if self.snapshot is not None and offset == self.snapshot.end_offset - 1:
            return self.snapshot.epoch
        return None

    def end_offset_for_epoch(self, epoch: int) -> SnapshotId | None:
        """The largest epoch <= `epoch` held and the offset just after its last entry.

        None when every epoch held is newer (the answer lies below the log start).
        """
        index = bisect_right(self._epochs, (epoch, 1 << 62)) - 1
        if index < 0:
            return None
        found_epoch = self._epochs[index][0]
        if index + 1 < len(self._epochs):
            return SnapshotId(self._epochs[index + 1][1], found_epoch)
        return SnapshotId(self.end_offset, found_epoch)

    def entries_from(self, offset: int, max_bytes: int) -> tuple[Entry, ...]:
        """Entries from `offset`, at least one, stopping before `max_bytes` of payload.

        The last answer is kept: after an append, every parked observer (hundreds of brokers)
        asks for the same range. An append moves the log end, so it is asked again; a
        truncation or a snapshot clears it. The log end and its epoch alone do not identify the
        entries: a leader that could not write its own entries drops them and appends others at
        the same offsets in the same epoch (`RaftCore.writes_failed`)."""
        key = (offset, max_bytes, self.end_offset, self.last_epoch, self._start)
        if self._last_range is not None and self._last_range[0] == key:
            return self._last_range[1]
        out: list[Entry] = []
        size = 0
        for index in range(offset - self._start, len(self._entries)):
            entry = self._entries[index]
            size += len(entry.data) + 64
            if out and size > max_bytes:
                break
            out.append(entry)
        found = tuple(out)
        self._last_range = (key, found)
        return found

    # --- changes (each mirrors a write the core asks the driver for) ----------------------

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset:
                raise ValueError(f"entry at {entry.offset}, log ends at {self.end_offset}")
            if entry.epoch < self.last_epoch and (self._entries or self.snapshot is not None):
                raise ValueError(f"entry epoch {entry.epoch} is older than {self.last_epoch}")
            if not self._epochs or self._epochs[-1][0] != entry.epoch:
                self._epochs.append((entry.epoch, entry.offset))
            self._entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"truncate to {offset} below the log start {self._start}")
        del self._entries[offset - self._start :]
        self._last_range = None
        if offset == self._start:
            self._rebuild_epochs()
            return
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()

    def install_snapshot(self, snapshot: SnapshotId, data: bytes) -> bool:
        """Make `snapshot` the log start: keep the entries after it if they continue it,
        else drop the whole log (a snapshot fetched from the leader replaces a diverged log).
        Returns True when the whole log was dropped."""
        self.snapshot, self.snapshot_data = snapshot, data
        self._last_range = None
        end = snapshot.end_offset
        keep = self._start <= end <= self.end_offset and (
            end == self._start or self._entries[end - 1 - self._start].epoch == snapshot.epoch
        )
        if keep:
            del self._entries[: end - self._start]
        else:
            self._entries = []
        self._start = end
        self._rebuild_epochs()
        return not keep
