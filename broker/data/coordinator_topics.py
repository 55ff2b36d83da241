"""The coordinators' internal topics as a broker writes them: acks=all, on the leader.

The group driver (`__consumer_offsets`) and the transaction driver (`__transaction_state`)
reach the broker only through the `CoordinatorTopic` protocol
(strom.broker.drivers.coordinator_topic); `BrokerCoordinatorTopic` is the broker's
implementation, and the factories below build each driver over it. It lives beside the
Produce path because a coordinator write is a Produce with acks=all in all but name, as in
Kafka (both coordinators append with required acks -1): the same checks before the append
(`acks_all_refusal`: this broker has taken the leader role, the ISR is at least
min.insync.replicas), the append itself (origin COORDINATOR, in the leader epoch of the
image), the same wake-ups after it, and the same wait for the high watermark
(`await_replication`, bounded by `offsets.commit.timeout.ms` for groups and by the
transaction's timeout for transaction state, as Kafka bounds them). A single-replica
partition is committed at append and answers at once.

The drivers act on a write (answer OffsetCommit, SyncGroup, InitProducerId, EndTxn...) only
once the wait says NONE; any other outcome goes through the coordinator's error mapping
(`strom.coordinator.groups.outbox.storage_error`,
`strom.coordinator.transactions.txn_state_manager.append_error`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker import runtime
from strom.broker.data.append import AppendOutcome, acks_all_refusal, await_replication
from strom.broker.data.lookup import Located, MinIsrCache, locate
from strom.broker.data.producer_ids import ProducerIdError, ProducerIdManager
from strom.broker.data.txn_marker_channel import BrokerMarkerChannel
from strom.broker.data.waiters import DataWaiters
from strom.broker.drivers.coordinator_topic import Replicated
from strom.broker.drivers.groups import GroupDriver, group_config
from strom.broker.drivers.topics import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    create_internal_topic,
    internal_topic,
)
from strom.broker.drivers.transactions import TransactionDriver
from strom.broker.replication.partitions import report_storage
from strom.broker.replication.replication_manager import ReplicationManager
from strom.coordinator.metadata.image import TRANSACTION_VERSION
from strom.coordinator.transactions.txn_api import TxnConfig
from strom.storage import AppendOrigin, KafkaStorageError, LogAppendError, PartitionLog
from strom.storage.log.producer_state import VerificationGuard
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore


class BrokerCoordinatorTopic:
    """`CoordinatorTopic` over a broker: its metadata image, logs, replication and controller."""

    def __init__(
        self,
        state: BrokerCore,
        replication: ReplicationManager,
        waiters: DataWaiters,
        min_isr: MinIsrCache,
        name: str,
        commit_timeout_ms: int,
    ) -> None:
        self._state = state
        self._replication = replication
        self._waiters = waiters
        self._min_isr = min_isr
        self.name = name
        self._commit_timeout_ms = commit_timeout_ms

    def partitions(self) -> list[int] | None:
        topic = self._state.image.topic(self.name)
        return None if topic is None else sorted(topic.partitions)

    def leader(self, partition: int) -> tuple[PartitionLog, int] | None:
        image = self._state.image.partition(self.name, partition)
        if image is None or image.leader != self._state.node_id:
            return None
        partition_log = self._state.logs.get(self.name, partition)
        return None if partition_log is None else (partition_log, image.leader_epoch)

    def append(
        self,
        partition: int,
        batch: bytes | bytearray,
        now: int,
        timeout_ms: int | None = None,
        *,
        verification: VerificationGuard | None = None,
    ) -> ErrorCode | Replicated:
        state, name = self._state, self.name
        found = locate(state, name, partition)
        if not isinstance(found, Located):
            return found
        image, partition_log = found
        refused = acks_all_refusal(state, self._replication, self._min_isr, name, image)
        if refused:
            return refused
        try:
            result = partition_log.append(
                batch,
                image.leader_epoch,
                now,
                origin=AppendOrigin.COORDINATOR,
                verification=verification,
            )
        except LogAppendError as exc:
            if isinstance(exc, KafkaStorageError):
                report_storage(state)
            return exc.error
        leadership = self._replication.leader_appended((name, partition))
        self._waiters.changed(name, partition)
        # flush.messages: fsynced before it is acknowledged, as a produce's (Kafka flushes
        # inside the append, whoever appends)
        flush = partition_log.flush_owed()
        if leadership is None and not flush:
            return ErrorCode.NONE  # one replica: committed at append
        outcome = AppendOutcome(partition, ErrorCode.NONE, result, awaiting=leadership)
        wait_ms = self._commit_timeout_ms if timeout_ms is None else timeout_ms

        async def replicated() -> ErrorCode:
            if flush:
                try:
                    await runtime.to_thread(partition_log.flush)
                except KafkaStorageError:
                    report_storage(state)
                    return ErrorCode.KAFKA_STORAGE_ERROR
            if leadership is None:
                return ErrorCode.NONE
            await await_replication(
                state, self._replication, self._waiters, self._min_isr, [(name, outcome)], wait_ms
            )
            return outcome.error

        return replicated

    async def create(self) -> ErrorCode:
        return await create_internal_topic(
            self._state.topics, internal_topic(self._state.config, self.name)
        )


def group_driver(
    state: BrokerCore, replication: ReplicationManager, waiters: DataWaiters, min_isr: MinIsrCache
) -> GroupDriver:
    """The group driver a broker runs: its `__consumer_offsets`, config and clock."""
    topic = BrokerCoordinatorTopic(
        state,
        replication,
        waiters,
        min_isr,
        CONSUMER_OFFSETS,
        state.config.offsets_commit_timeout_ms,
    )
    return GroupDriver(
        topic,
        group_config(state.config),
        num_partitions=state.config.offsets_topic_num_partitions,
        retention_check_interval_ms=state.config.offsets_retention_check_interval_ms,
        clock=state.clock,
    )


def transaction_driver(
    state: BrokerCore,
    replication: ReplicationManager,
    waiters: DataWaiters,
    min_isr: MinIsrCache,
    producer_ids: ProducerIdManager,
) -> TransactionDriver:
    """The transaction driver a broker runs: its `__transaction_state`, producer ids, markers
    through the partition leaders, config and clock."""
    config = state.config

    async def new_producer_id() -> int | ErrorCode:
        try:
            return await producer_ids.next_id()
        except ProducerIdError as exc:
            return exc.error

    topic = BrokerCoordinatorTopic(
        state,
        replication,
        waiters,
        min_isr,
        TRANSACTION_STATE,
        # Kafka bounds each append's ISR wait by the transaction's own timeout
        config.transaction_max_timeout_ms,
    )
    return TransactionDriver(
        topic,
        TxnConfig(
            num_partitions=config.transaction_state_log_num_partitions,
            max_timeout_ms=config.transaction_max_timeout_ms,
            id_expiration_ms=config.transactional_id_expiration_ms,
        ),
        markers=BrokerMarkerChannel(state, replication, waiters, min_isr),
        new_producer_id=new_producer_id,
        transaction_version=lambda: state.image.features.get(TRANSACTION_VERSION, 0),
        clock=state.clock,
        abort_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        expire_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
        load_buffer_bytes=config.transaction_state_log_load_buffer_size,
    )
