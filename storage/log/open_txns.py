"""Which transactions keep a partition's last stable offset (LSO) down.

Kafka's ProducerStateManager keeps two sets, and so does `OpenTransactions`:

- *ongoing*: transactions with data in the log and no COMMIT/ABORT marker yet, by first
  offset. They are undecided.
- *unreplicated*: transactions whose marker is in the log but at or past the high
  watermark. They are decided here, but the marker could still be truncated away by a
  leader change, so consumers must not pass them yet. A high watermark beyond the
  marker drops them.

The first unstable offset is the smallest first offset in either set; the LSO is the
smaller of it and the high watermark, and never below the log start offset (retention
or DeleteRecords may remove the start of an open transaction, as in Kafka). Everything
here is O(1) per fetch: the LSO is read, never searched for.

Ongoing transactions are kept in first-offset order (insertion order: a transaction
begins at the log end, so later ones start later; a rebuild re-sorts), and
unreplicated ones in marker order (appends also move forward), so the high watermark
prunes the latter from the front.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple


class CompletedTxn(NamedTuple):
    """A transaction its marker just ended (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    """The marker's offset."""
    aborted: bool


class OpenTransactions:
    """Ongoing and unreplicated transactions of one partition (see the module docstring)."""

    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}
        """first offset -> producer id, ascending first offsets."""
        self._unreplicated: deque[CompletedTxn] = deque()
        """Completed transactions whose marker is not below the high watermark, marker order."""

    # --- changes ---------------------------------------------------------------------------

    def begin(self, producer_id: int, first_offset: int) -> None:
        ongoing = self._ongoing
        if ongoing and first_offset < next(reversed(ongoing)):
            ongoing[first_offset] = producer_id
            self._ongoing = dict(sorted(ongoing.items()))
        else:
            ongoing[first_offset] = producer_id

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO to record with `txn` in the aborted-transaction index, before completing it:
        the first offset of the oldest ongoing transaction of another producer, else the
        offset after the marker (Kafka's `lastStableOffset(completedTxn)`)."""
        for first, pid in self._ongoing.items():
            if pid != txn.producer_id:
                return first
        return txn.last_offset + 1

    def complete(self, txn: CompletedTxn, high_watermark: int) -> None:
        """The marker of `txn` was appended: it stops being ongoing, and stays unstable until
        the high watermark passes its marker."""
        self._ongoing.pop(txn.first_offset, None)
        if txn.last_offset >= high_watermark:
            self._unreplicated.append(txn)

    def forget_below(self, offset: int) -> None:
        """Forget completed transactions whose markers are below `offset`: the high watermark
        passed them, or the log start (retention, DeleteRecords) did."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < offset:
            unreplicated.popleft()

    def clear(self) -> None:
        self._ongoing.clear()
        self._unreplicated.clear()

    def restore(self, ongoing: dict[int, int], unreplicated: list[CompletedTxn]) -> None:
        """Load state (snapshot, rebuild): `ongoing` first offset -> producer id."""
        self._ongoing = dict(sorted(ongoing.items()))
        self._unreplicated = deque(sorted(unreplicated, key=lambda t: t.last_offset))

    # --- queries ---------------------------------------------------------------------------

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The smallest first offset of an ongoing transaction, or of a completed one whose
        marker is not below `high_watermark` (None: none). Reads only: the high watermark's
        own moves (`forget_below`) drop what it passed."""
        first = next(iter(self._ongoing), None)
        for txn in self._unreplicated:
            if txn.last_offset >= high_watermark and (first is None or txn.first_offset < first):
                first = txn.first_offset
        return first

    def first_undecided_offset(self) -> int | None:
        """The smallest first offset of an ongoing transaction (None: none)."""
        return next(iter(self._ongoing), None)

    def unreplicated(self) -> list[CompletedTxn]:
        return list(self._unreplicated)

    @property
    def ongoing_count(self) -> int:
        return len(self._ongoing)
