"""One partition's share of a Produce request: checks, the append, durability, wake-ups.

Kafka's order for a partition that exists: the request-level record checks of
Produce v3+ (exactly one magic-2 batch; zstd only from v7), writes to internal
topics refused to clients, min.insync.replicas for acks=-1, then the log's own
validation and idempotence checks (broker.log.validate / producer_state).

acks=all: a partition with more than one replica answers once its high watermark passes the
appended records, i.e. every member of the ISR holds them (`await_replication`, which the
Produce handler runs for all its partitions together after appending them all). A
single-replica partition is committed at append and never waits.

Durability: an append only reaches the page cache. When the topic's
`flush.messages` says the log is due (e.g. flush.messages=1), the fsync runs
in a worker thread and the answer waits for it, so "acked" means "fsynced"
exactly as with Kafka's in-line flush; otherwise the broker's flush loop
handles flush.ms in the background.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strom.broker import runtime
from strom.broker.data.lookup import Located, MinIsrCache, locate
from strom.broker.data.waiters import DataWaiters
from strom.broker.drivers.topics import is_internal_topic
from strom.broker.replication.partitions import report_storage
from strom.broker.replication.replication_manager import Leadership, ReplicationManager
from strom.storage import AppendResult, KafkaStorageError, LogAppendError
from strom.storage.log.producer_state import VerificationGuard
from strom.wire.errors import ErrorCode
from strom.wire.messages.produce import ProduceResponse
from strom.wire.records import (
    CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC,
    PEEK_CODEC_SIZE,
    PEEK_MAGIC_SIZE,
    Codec,
    peek_attributes,
    peek_length,
    peek_magic,
)

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.coordinator.metadata.image import PartitionImage
    from strom.wire.message import Records

ADMIN_CLIENT_ID = "__admin_client"
"""Kafka lets only this client id append to internal topics."""
FIRST_ZSTD_VERSION = 7
MIN_LEGACY_RECORD = 14
"""Smallest legal record length field (Kafka's LegacyRecord.RECORD_OVERHEAD_V0)."""

PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage

# Errors Kafka reports without the partition's log start offset (UNKNOWN_LOG_APPEND_INFO).
_NO_LOG_START = frozenset(
    {
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)


@dataclass
class AppendOutcome:
    """What one partition answers; `error_message`/`record_errors` only for record errors."""

    index: int
    error: ErrorCode = ErrorCode.NONE
    result: AppendResult | None = None
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    awaiting: Leadership | None = None
    """acks=all on a replicated partition: answered once the ISR holds the records
    (`await_replication`)."""

    def response(self) -> PartitionResponse:
        if self.result is not None and self.error == ErrorCode.NONE:
            r = self.result
            return PartitionResponse(
                index=self.index,
                error_code=ErrorCode.NONE,
                base_offset=r.base_offset,
                log_append_time_ms=r.log_append_time_ms,
                log_start_offset=r.log_start_offset,
            )
        return PartitionResponse(
            index=self.index,
            error_code=self.error,
            base_offset=-1,
            log_append_time_ms=-1,
            log_start_offset=self.log_start_offset,
            record_errors=[RecordError(i, m) for i, m in self.record_errors],
            error_message=self.error_message,
        )


def first_batch(records: Records | None, version: int) -> memoryview | ErrorCode:
    """Produce v3+'s request-level check: the one whole batch, or the error Kafka gives.

    Kafka's order: at least one batch, magic 2, zstd only from v7, no second
    batch (INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE; a nonsensical length
    is CORRUPT_MESSAGE). Like Kafka's batch iterator, a trailing partial batch
    is not a batch: it is dropped (Kafka trims it before the append).
    """
    view = memoryview(records if records is not None else b"")
    first = _frame(view, 0)
    if isinstance(first, ErrorCode):
        return first
    if first == 0 or peek_magic(view) != MAGIC:
        return ErrorCode.INVALID_RECORD
    if (
        version < FIRST_ZSTD_VERSION
        and first >= PEEK_CODEC_SIZE
        and peek_attributes(view) & CODEC_MASK == Codec.ZSTD
    ):
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    second = _frame(view, first)
    if isinstance(second, ErrorCode):
        return second
    if second:
        return ErrorCode.INVALID_RECORD
    return view[:first]


def _frame(view: memoryview, pos: int) -> int | ErrorCode:
    """Size of the whole batch at `pos`; 0 when there is none (end or partial)."""
    if len(view) - pos < PEEK_MAGIC_SIZE:
        return 0
    length = peek_length(view, pos)
    if length < MIN_LEGACY_RECORD or peek_magic(view, pos) > MAGIC:
        return ErrorCode.CORRUPT_MESSAGE
    size = length + LOG_OVERHEAD
    return size if size <= len(view) - pos else 0


async def append_partition(
    broker: BrokerCore,
    replication: ReplicationManager,
    waiters: DataWaiters,
    min_isr: MinIsrCache,
    topic: str,
    index: int,
    batch: memoryview,
    acks: int,
    client_id: str | None,
    verification: VerificationGuard | None = None,
) -> AppendOutcome:
    """Append one partition's batch; never raises for Kafka-level errors. `verification`:
    the guard a transactional batch was verified under (strom.broker.data.txn_verify)."""
    if is_internal_topic(topic) and client_id != ADMIN_CLIENT_ID:
        return AppendOutcome(index, ErrorCode.INVALID_TOPIC_EXCEPTION)
    found = locate(broker, topic, index)
    if not isinstance(found, Located):
        return AppendOutcome(index, found)
    partition, log = found
    if acks == -1:
        refused = acks_all_refusal(broker, replication, min_isr, topic, partition)
        if refused == ErrorCode.NOT_ENOUGH_REPLICAS:
            return AppendOutcome(index, refused, log_start_offset=log.log_start_offset)
        if refused:
            return AppendOutcome(index, refused)
    try:
        result = log.append(
            batch, partition.leader_epoch, broker.clock(), verification=verification
        )
    except LogAppendError as exc:
        if isinstance(exc, KafkaStorageError):
            report_storage(broker)  # before answering: the client's next Metadata sees it
        start = -1 if exc.error in _NO_LOG_START else log.log_start_offset
        message = exc.message if exc.record_errors else None
        return AppendOutcome(index, exc.error, None, start, message, exc.record_errors)
    leadership = replication.leader_appended((topic, index))
    if not result.duplicate:
        if leadership is None:
            waiters.changed(topic, index)  # committed at append: consumers may read it
        else:  # followers fetch it; consumers and acks=all wait for the high watermark
            waiters.appended(topic, index)
        if log.flush_owed():
            try:
                await runtime.to_thread(log.flush)
            except KafkaStorageError:
                report_storage(broker)
                return AppendOutcome(index, ErrorCode.KAFKA_STORAGE_ERROR)
    outcome = AppendOutcome(index, ErrorCode.NONE, result)
    if acks == -1 and leadership is not None:
        outcome.awaiting = leadership
    return outcome


def acks_all_refusal(
    broker: BrokerCore,
    replication: ReplicationManager,
    min_isr: MinIsrCache,
    topic: str,
    partition: PartitionImage,
) -> ErrorCode:
    """acks=all's check before appending to a partition this broker leads: NOT_LEADER_OR_FOLLOWER
    while the image names it leader of a replicated partition whose role it has not taken yet,
    NOT_ENOUGH_REPLICAS with an ISR smaller than min.insync.replicas, else NONE. (Produce and the
    group coordinator's writes to `__consumer_offsets` both check it.)"""
    leadership = replication.leaders.get((topic, partition.partition_id))
    if leadership is None and len(partition.replicas) > 1:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    isr = partition.isr if leadership is None else leadership.replica_set.isr
    if len(isr) < min_isr.get(broker, topic):
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return ErrorCode.NONE


async def await_replication(
    broker: BrokerCore,
    replication: ReplicationManager,
    waiters: DataWaiters,
    min_isr: MinIsrCache,
    pending: list[tuple[str, AppendOutcome]],
    timeout_ms: int,
) -> None:
    """acks=all on replicated partitions: wait until each partition's high watermark passes
    its records, then answer NONE or NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below
    min.insync.replicas meanwhile); NOT_LEADER_OR_FOLLOWER if this broker stopped leading it;
    REQUEST_TIMED_OUT once the request's `timeout_ms` passed (Kafka's produce purgatory)."""
    def settled(item: tuple[str, AppendOutcome]) -> bool:
        topic, outcome = item
        leadership = outcome.awaiting
        assert leadership is not None
        assert outcome.result is not None
        if replication.leaders.get((topic, outcome.index)) is not leadership:
            _fail(outcome, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return True
        answer = leadership.replica_set.acks_all_outcome(
            outcome.result.last_offset, min_isr.get(broker, topic)
        )
        if answer is None:
            return False
        if answer != ErrorCode.NONE:
            _fail(outcome, answer)
        return True

    def key(item: tuple[str, AppendOutcome]) -> tuple[str, int]:
        return item[0], item[1].index

    timed_out = await waiters.settle(pending, key, settled, timeout_ms)
    for _, outcome in timed_out:
        _fail(outcome, ErrorCode.REQUEST_TIMED_OUT)


def _fail(outcome: AppendOutcome, error: ErrorCode) -> None:
    outcome.error, outcome.result, outcome.awaiting = error, None, None
