"""Leader epoch history: which epoch's leader wrote from which offset on.

Persisted as `leader-epoch-checkpoint` in the partition directory, in Kafka's
checkpoint format (see `strom.storage.log.checkpoint`): version `0`, the entry count,
then one `epoch startOffset` line per epoch, oldest first. Epochs and start
offsets both strictly increase.

Crash recovery: the file is replaced atomically whenever an epoch is added, so
it is never torn. Appends, retention and truncation replace it without fsync
(no fsync on the event loop; each of those changes is re-derived on load, see
below); the partition's next flush makes it durable before the recovery point
moves past a new entry, so after a crash it may lack epochs of the unflushed
tail, which the loader re-derives from the rescanned batches' partitionLeaderEpoch
fields. It may also run ahead of the log (an entry written just before a data
write that then failed or was lost), so on load every entry at or past the log
end offset is dropped, and entries wholly below the log start offset collapse
into one starting there. A missing or unreadable file is rebuilt from the
batches' partitionLeaderEpoch fields.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from pathlib import Path

from strom.storage.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger(__name__)


class LeaderEpochCache:
    """Sorted (epoch, start_offset) entries with Kafka's LeaderEpochFileCache semantics."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[tuple[int, int]] = []
        self.unsynced = False
        """Saved without fsync since the last durable save: the next flush fsyncs the file."""

    def load(self) -> bool:
        """Read the file; False if it is missing or corrupt (caller rebuilds from the log)."""
        try:
            rows = read_checkpoint(self.path, 2)
            if rows is None:
                return False
            entries = [(int(e), int(o)) for e, o in rows]
        except (CheckpointError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return False
        self.entries = []
        for epoch, offset in entries:
            self._put(epoch, offset)
        return True

    def save(self, *, sync: bool = True) -> None:
        """Replace the file; unsynced saves leave durability to the partition's next flush."""
        write_checkpoint(self.path, self.entries, sync=sync)
        self.unsynced = not sync

    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def epoch_at(self, offset: int) -> int | None:
        """The epoch that wrote `offset` (None if before the first entry)."""
        i = bisect_right([o for _, o in self.entries], offset) - 1
        return self.entries[i][0] if i >= 0 else None

    def needs(self, epoch: int, start_offset: int) -> bool:
        """Whether `assign(epoch, start_offset)` would change anything."""
        if epoch < 0:
            return False
        if not self.entries:
            return True
        latest_epoch, latest_offset = self.entries[-1]
        return epoch != latest_epoch or start_offset < latest_offset

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if changed (caller then saves)."""
        if not self.needs(epoch, start_offset):
            return False
        self._put(epoch, start_offset)
        return True

    def _put(self, epoch: int, start_offset: int) -> None:
        # Entries that are not below the new one in both epoch and offset are stale.
        while self.entries and (
            self.entries[-1][0] >= epoch or self.entries[-1][1] >= start_offset
        ):
            self.entries.pop()
        self.entries.append((epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after `end_offset` (log truncated to it)."""
        keep = bisect_left([o for _, o in self.entries], end_offset)
        changed = keep < len(self.entries)
        del self.entries[keep:]
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """Collapse entries below a new log start offset into one starting there."""
        below = bisect_right([o for _, o in self.entries], start_offset) - 1
        if below < 0 or (below == 0 and self.entries[0][1] == start_offset):
            return False
        epoch = self.entries[below][0]
        self.entries[: below + 1] = [(epoch, start_offset)]
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, end offset of that epoch)."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        epochs = [e for e, _ in self.entries]
        higher = bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self.entries[0][1]
        return self.entries[higher - 1][0], self.entries[higher][1]
