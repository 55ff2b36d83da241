"""What a cleaning pass knows about transactions as it walks the log (Kafka's
CleanedTransactionMetadata).

Kafka's rules for compacting transactional data, which a pass applies batch by batch:

- The pass never goes past the last stable offset, so every transaction it meets with a
  marker in the cleaned range is decided, and the aborted ones are all in the segments'
  `.txnindex` files: the pass starts from that list (by first offset).
- A data batch of an aborted transaction is removed whatever its keys (and never enters
  the key map); kept empty only if it is its producer's newest batch (sequence numbers).
- An ABORT marker is kept while this pass saw data of its transaction (it goes into the
  cleaned segment's `.txnindex` again); a COMMIT marker while this pass saw data of its
  transaction. Otherwise the marker is *discardable*: the first pass that finds it so gives
  it a delete horizon (now + delete.retention.ms, stored like a tombstone's: attribute bit 6
  and the base timestamp), and a pass at or after the horizon removes it, so a consumer
  that read the transaction's data has delete.retention.ms to read its marker too. A
  marker that is its producer's newest entry (no data batch in its epoch) is kept as an
  empty control batch instead, for fencing, as Kafka's cleaner does.
- An empty control batch (a marker already emptied) is discardable at once.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from strom.storage.log.txn_index import AbortedTxn
from strom.wire.records import BatchHeader, ControlType, EndTxnMarker


@dataclass
class _Aborting:
    txn: AbortedTxn
    seen_data: bool = False


class CleanedTransactions:
    """The transaction state of one walk over the log (a pass's map or its rewrite)."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._aborting: dict[int, _Aborting] = {}
        self._committing: set[int] = set()
        self.kept_aborted: list[AbortedTxn] = []
        """Aborted transactions whose markers stay, for the cleaned segment's `.txnindex`
        (the caller takes them per output segment)."""

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._aborting.setdefault(txn.producer_id, _Aborting(txn))

    def on_data(self, header: BatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (to be removed)."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        aborting = self._aborting.get(header.producer_id)
        if aborting is not None:
            aborting.seen_data = True
            return True
        self._committing.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """A control batch: True if it is discardable (see the module docstring)."""
        self._reach(header.last_offset)
        if marker is None:
            return True
        pid = header.producer_id
        if marker.control_type == ControlType.ABORT:
            aborting = self._aborting.pop(pid, None)
            if aborting is not None and aborting.seen_data:
                self.kept_aborted.append(aborting.txn)
                return False
            return True
        if marker.control_type == ControlType.COMMIT:
            if pid in self._committing:
                self._committing.discard(pid)
                return False
            return True
        return False
