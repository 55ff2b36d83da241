"""`__consumer_offsets` as a broker's group coordinator writes it: acks=all, on the leader.

The group driver (strom.broker.drivers.groups) reaches the broker only through the
`OffsetsTopic` protocol; this is the broker's implementation. It lives beside the Produce
path because a coordinator write is a Produce with acks=all in all but name, as in Kafka
(the coordinator appends with required acks -1): the same checks before the append
(`acks_all_refusal`: this broker has taken the leader role, the ISR is at least
min.insync.replicas), the append itself (origin COORDINATOR, in the leader epoch of the
image), the same wake-ups after it, and the same wait for the high watermark
(`await_replication`, bounded by `offsets.commit.timeout.ms`). A single-replica partition is
committed at append and answers at once, as before replication existed.

The driver answers OffsetCommit, SyncGroup, OffsetDelete and DeleteGroups only once the
wait says NONE; any other outcome goes through the coordinator's error mapping
(`strom.coordinator.groups.outbox.storage_error`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.data.append import AppendOutcome, acks_all_refusal, await_replication
from strom.broker.data.lookup import Located, locate
from strom.broker.data.waiters import DataWaiters
from strom.broker.drivers.groups import GroupDriver, Replicated, group_config
from strom.broker.drivers.topics import (
    CONSUMER_OFFSETS,
    create_internal_topic,
    internal_topic,
)
from strom.broker.replication.partitions import report_storage
from strom.broker.replication.replication_manager import ReplicationManager
from strom.storage import AppendOrigin, KafkaStorageError, LogAppendError, PartitionLog
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.state import BrokerState


class BrokerOffsetsTopic:
    """`OffsetsTopic` over a broker: its metadata image, logs, replication and controller."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def partitions(self) -> list[int] | None:
        topic = self._state.image.topic(CONSUMER_OFFSETS)
        return None if topic is None else sorted(topic.partitions)

    def leader(self, partition: int) -> tuple[PartitionLog, int] | None:
        image = self._state.image.partition(CONSUMER_OFFSETS, partition)
        if image is None or image.leader != self._state.node_id:
            return None
        partition_log = self._state.logs.get(CONSUMER_OFFSETS, partition)
        return None if partition_log is None else (partition_log, image.leader_epoch)

    def append(self, partition: int, batch: bytes | bytearray, now: int) -> ErrorCode | Replicated:
        state = self._state
        found = locate(state, CONSUMER_OFFSETS, partition)
        if not isinstance(found, Located):
            return found
        image, partition_log = found
        refused = acks_all_refusal(state, CONSUMER_OFFSETS, image)
        if refused:
            return refused
        try:
            result = partition_log.append(
                batch, image.leader_epoch, now, origin=AppendOrigin.COORDINATOR
            )
        except LogAppendError as exc:
            if isinstance(exc, KafkaStorageError):
                report_storage(state)
            return exc.error
        leadership = ReplicationManager.of(state).leader_appended((CONSUMER_OFFSETS, partition))
        DataWaiters.of(state).changed(CONSUMER_OFFSETS, partition)
        if leadership is None:
            return ErrorCode.NONE  # one replica: committed at append
        outcome = AppendOutcome(partition, ErrorCode.NONE, result, awaiting=leadership)
        timeout_ms = state.config.offsets_commit_timeout_ms

        async def replicated() -> ErrorCode:
            await await_replication(state, [(CONSUMER_OFFSETS, outcome)], timeout_ms)
            return outcome.error

        return replicated

    async def create(self) -> ErrorCode:
        return await create_internal_topic(
            self._state.topics, internal_topic(self._state.config, CONSUMER_OFFSETS)
        )


def group_driver(state: BrokerState) -> GroupDriver:
    """The group driver a broker runs: its `__consumer_offsets`, config and clock."""
    return GroupDriver(
        BrokerOffsetsTopic(state),
        group_config(state.config),
        num_partitions=state.config.offsets_topic_num_partitions,
        retention_check_interval_ms=state.config.offsets_retention_check_interval_ms,
        clock=state.clock,
    )
