"""What the log remembers about one idempotent producer, and DescribeProducers' view of it.

Kafka's ProducerStateEntry: the epoch, the last five batches (so retries
within the client's five in-flight requests are recognised), the last
timestamp (for producer.id.expiration.ms), the coordinator epoch of the last
transaction marker and the first offset of an open transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from strom.wire.records import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: list[BatchMetadata] = field(default_factory=list)
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.epoch,
            list(self.batches),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def add(self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record an appended data batch (a new epoch forgets the old epoch's batches)."""
        if header.producer_epoch != self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        if header.base_sequence != NO_SEQUENCE:
            meta = BatchMetadata(
                header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp
            )
            self.batches.append(meta)
            del self.batches[:-NUM_BATCHES_TO_RETAIN]
        self.last_timestamp = timestamp
        if header.is_transactional and self.current_txn_first_offset < 0:
            self.current_txn_first_offset = first_offset

    def end_txn(self, epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """Record a commit/abort marker: the transaction ends; a newer epoch (transactions v2
        bump it with every marker, a fenced producer's abort carries the bumped one) forgets
        the old epoch's batches."""
        if epoch > self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.coordinator_epoch = max(self.coordinator_epoch, coordinator_epoch)
        self.current_txn_first_offset = -1
        self.last_timestamp = timestamp


@dataclass(frozen=True)
class ProducerInfo:
    """One row of DescribeProducers."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)
