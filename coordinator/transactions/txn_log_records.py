"""The records of `__transaction_state`, in Kafka's own formats (Kafka's TransactionLog).

One record per transition of a transactional id; the last one per key is its state
(compaction keeps only it):

| part | bytes |
|---|---|
| key | int16 version 0, `TransactionLogKey { transactionalId: string }` |
| value | int16 version, `TransactionLogValue { producerId, producerEpoch, transactionTimeoutMs, transactionStatus (the state id), transactionPartitions (null when Empty), transactionLastUpdateTimestampMs, transactionStartTimestampMs }`; version 1 (flexible, with tagged previousProducerId, nextProducerId and clientTransactionVersion) once `transaction.version` >= 1, version 0 before, as Kafka writes them |
| deletion | the same key, a null value (an expired transactional id) |

Kafka's tools (kafka-dump-log's transaction decoder) read them. The last producer epoch is not
recorded: a loaded id has none (NO_PRODUCER_EPOCH), as in Kafka.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from strom.coordinator.transactions.txn_metadata import (
    NO_PRODUCER_EPOCH,
    TxnMetadata,
    TxnState,
    TxnTransit,
)
from strom.wire.errors import ProtocolError
from strom.wire.formats.transaction_coordinator.transaction_log_key import TransactionLogKey
from strom.wire.formats.transaction_coordinator.transaction_log_value import TransactionLogValue

KEY_VERSION = 0
_SHORT = struct.Struct(">h")

KeyValue = tuple[bytes, bytes | None]


def value_version(transaction_version: int) -> int:
    """Flexible values (version 1) from transaction.version 1 on (KIP-890)."""
    return 1 if transaction_version >= 1 else 0


def txn_key(transactional_id: str) -> bytes:
    return _SHORT.pack(KEY_VERSION) + TransactionLogKey(transactional_id).encode(KEY_VERSION)


def txn_record(transactional_id: str, transit: TxnTransit, transaction_version: int) -> KeyValue:
    """The record a transition writes."""
    if transit.state is TxnState.EMPTY and transit.partitions:
        raise ValueError(f"{transactional_id}: an Empty transaction with partitions")
    partitions: list[TransactionLogValue.PartitionsSchema] | None = None
    if transit.state is not TxnState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(transit.partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [TransactionLogValue.PartitionsSchema(t, ps) for t, ps in by_topic.items()]
    version = value_version(transaction_version)
    flexible = version >= 1  # the tagged fields exist only there
    value = TransactionLogValue(
        producer_id=transit.producer_id,
        previous_producer_id=transit.prev_producer_id if flexible else -1,
        next_producer_id=transit.next_producer_id if flexible else -1,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.timeout_ms,
        transaction_status=int(transit.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.update_ms,
        transaction_start_timestamp_ms=transit.start_ms,
        client_transaction_version=transit.client_tv if flexible else 0,
    )
    return txn_key(transactional_id), _SHORT.pack(version) + value.encode(version)


def tombstone(transactional_id: str) -> KeyValue:
    return txn_key(transactional_id), None


@dataclass(frozen=True, slots=True)
class TxnRecord:
    transactional_id: str
    metadata: TxnMetadata | None
    """None: a tombstone (the id expired)."""


def parse_txn_record(key: bytes | None, value: bytes | None) -> TxnRecord | None:
    """One record of the topic; None for a key version this coordinator does not know
    (Kafka skips those too)."""
    if key is None or len(key) < 2:
        raise ProtocolError("__transaction_state record without a key")
    version = _SHORT.unpack_from(key)[0]
    if version != KEY_VERSION:
        return None
    transactional_id = TransactionLogKey.decode(memoryview(key)[2:], version).transactional_id
    if value is None:
        return TxnRecord(transactional_id, None)
    if len(value) < 2:
        raise ProtocolError(f"{transactional_id}: a transaction state value without a version")
    v_version = _SHORT.unpack_from(value)[0]
    if not TransactionLogValue.MIN_VERSION <= v_version <= TransactionLogValue.MAX_VERSION:
        raise ProtocolError(f"{transactional_id}: unknown transaction state version {v_version}")
    v = TransactionLogValue.decode(memoryview(value)[2:], v_version)
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise ProtocolError(
            f"{transactional_id}: unknown transaction state {v.transaction_status}"
        ) from None
    metadata = TxnMetadata(
        transactional_id,
        v.producer_id,
        prev_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        producer_epoch=v.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        timeout_ms=v.transaction_timeout_ms,
        state=state,
        start_ms=v.transaction_start_timestamp_ms,
        update_ms=v.transaction_last_update_timestamp_ms,
        client_tv=v.client_transaction_version,
    )
    if state is not TxnState.EMPTY:
        for schema in v.transaction_partitions or []:
            metadata.partitions.update((schema.topic, p) for p in schema.partition_ids)
    return TxnRecord(transactional_id, metadata)
