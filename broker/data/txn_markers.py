"""Transaction markers as a partition leader writes them: the data path of WriteTxnMarkers.

A marker is a control batch of one COMMIT or ABORT record (Kafka's ControlRecordType:
ABORT = 0, COMMIT = 1; key = version int16 0, type int16; value = version int16 0,
coordinator epoch int32), written by the transaction coordinator, through the partition's
leader, with the producer id and epoch of the transaction it ends. Kafka's KafkaApis
appends it with required acks -1, internal topics allowed and origin COORDINATOR; so does
`write_txn_markers`, on the partitions this broker leads:

- a partition missing from the metadata, or without a replica here (or offline here), is
  UNKNOWN_TOPIC_OR_PARTITION (Kafka's WriteTxnMarkers asks the replica manager for the
  partition's record format first, and a partition it does not host has none);
- a replica this broker does not lead is NOT_LEADER_OR_FOLLOWER; an ISR smaller than
  min.insync.replicas is NOT_ENOUGH_REPLICAS, nothing written (acks=all's refusal);
- the log's checks: INVALID_PRODUCER_EPOCH (an epoch older than the producer's; with
  transaction version 2 one not newer), TRANSACTION_COORDINATOR_FENCED (a coordinator epoch
  older than the producer's last marker's), KAFKA_STORAGE_ERROR. A marker for a producer
  the partition does not know, or with no transaction open there, is written anyway;
- then, as an acks=all produce, the answer waits until the high watermark passes the
  marker, i.e. every ISR member holds it: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
  NOT_LEADER_OR_FOLLOWER (leadership moved), REQUEST_TIMED_OUT after `timeout_ms`. NONE
  therefore means the marker is committed: no leader change can take it back.

The coordinator retries what did not answer NONE (Kafka's TransactionMarkerChannelManager).
A marker on `__consumer_offsets` also ends the group's pending transactional offsets; that
is the group coordinator's part, done by whoever handles the WriteTxnMarkers request once
this answers NONE.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from strom.broker import runtime
from strom.broker.data.append import AppendOutcome, acks_all_refusal, await_replication
from strom.broker.data.lookup import Located, MinIsrCache, locate
from strom.broker.data.waiters import DataWaiters
from strom.broker.replication.partitions import report_storage
from strom.broker.replication.replication_manager import ReplicationManager
from strom.storage import KafkaStorageError, LogAppendError
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore

Key = tuple[str, int]

DEFAULT_TIMEOUT_MS = 30_000
"""Kafka's broker `request.timeout.ms`, which bounds its marker appends."""


async def write_txn_markers(
    broker: BrokerCore,
    replication: ReplicationManager,
    waiters: DataWaiters,
    min_isr: MinIsrCache,
    partitions: Iterable[Key],
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    transaction_version: int = 0,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[Key, ErrorCode]:
    """Write one marker (COMMIT if `commit`, else ABORT) for `producer_id`/`producer_epoch`
    from coordinator epoch `coordinator_epoch` to each (topic, partition) this broker leads,
    and wait until the ISR of each holds it; the error per partition (module docstring),
    NONE meaning committed. `transaction_version`: the coordinator's transaction.version
    for this transaction (2: markers carry the bumped epoch, and the log holds them to it).
    Never raises for Kafka-level errors."""
    results: dict[Key, ErrorCode] = {}
    pending: list[tuple[str, AppendOutcome]] = []
    for key in dict.fromkeys(partitions):
        outcome = await _append_one(
            broker, replication, waiters, min_isr, key, producer_id, producer_epoch,
            coordinator_epoch, commit, transaction_version,
        )  # fmt: skip
        if isinstance(outcome, AppendOutcome):
            if outcome.awaiting is not None:
                pending.append((key[0], outcome))
            results[key] = outcome.error
        else:
            results[key] = outcome
    if pending:
        await await_replication(broker, replication, waiters, min_isr, pending, timeout_ms)
        for topic, outcome in pending:
            results[(topic, outcome.index)] = outcome.error
    return results


async def _append_one(
    broker: BrokerCore,
    replication: ReplicationManager,
    waiters: DataWaiters,
    min_isr: MinIsrCache,
    key: Key,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    transaction_version: int,
) -> AppendOutcome | ErrorCode:
    topic, index = key
    if broker.image.partition(topic, index) is None or broker.logs.get(topic, index) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    found = locate(broker, topic, index)
    if not isinstance(found, Located):
        return found
    partition, log = found
    refused = acks_all_refusal(broker, replication, min_isr, topic, partition)
    if refused:
        return refused
    try:
        result = log.append_marker(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            commit,
            partition.leader_epoch,
            broker.clock(),
            transaction_version=transaction_version,
        )
    except LogAppendError as exc:
        if isinstance(exc, KafkaStorageError):
            report_storage(broker)
        return exc.error
    leadership = replication.leader_appended(key)
    waiters.changed(topic, index)
    if log.log_end_offset - log.recovery_point >= log.config.flush_messages:
        try:
            await runtime.to_thread(log.flush)
        except KafkaStorageError:
            report_storage(broker)
            return ErrorCode.KAFKA_STORAGE_ERROR
    return AppendOutcome(index, ErrorCode.NONE, result, awaiting=leadership)
