"""Partition lookups shared by the data-plane handlers (Produce, Fetch, ListOffsets...).

Kafka's order of checks (ReplicaManager.getPartitionOrError, then
Partition.localLogWithEpochOrThrow): the topic-partition must be in the metadata
(UNKNOWN_TOPIC_OR_PARTITION); this broker must host a replica of it: a partition
with no log here answers NOT_LEADER_OR_FOLLOWER (its replicas are on other
brokers, or its log is not open yet) unless the log is offline for want of being
opened (KAFKA_STORAGE_ERROR, Kafka's offline partition; a log whose disk failed
is still found, and refuses appends itself; a broker that has not yet followed any
metadata image, a quorum member catching up at start, leads nothing); then a client-supplied current
leader epoch must match the partition's (older: FENCED_LEADER_EPOCH, newer:
UNKNOWN_LEADER_EPOCH; -1 means "not given"), and this broker must lead it
(NOT_LEADER_OR_FOLLOWER: a follower replica has its log but does not serve).

`require_leader=False` finds a follower replica's log too: the consumer Fetch v11+ a follower
serves (KIP-392, docs/replication.md) and ListOffsets from the debugging replica id -2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from strom.config import topic_min_insync_replicas
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.coordinator.metadata.image import MetadataImage, PartitionImage
    from strom.storage import PartitionLog

NO_LEADER_EPOCH = -1


class Located(NamedTuple):
    image: PartitionImage
    log: PartitionLog


def locate(
    broker: BrokerCore,
    topic: str,
    index: int,
    current_leader_epoch: int = NO_LEADER_EPOCH,
    image: MetadataImage | None = None,
    *,
    require_leader: bool = True,
) -> Located | ErrorCode:
    """The partition's metadata and log, or the error Kafka answers for it. Without
    `require_leader` a follower replica's log is found too (ListOffsets from the debugging
    replica id -2, a consumer's Fetch v11+: Kafka's `fetchOnlyFromLeader` false)."""
    partition = (image or broker.image).partition(topic, index)
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    log = broker.logs.get(topic, index)
    if log is None or not broker.followed:
        if log is None and broker.logs.is_offline(topic, index):
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # no replica here (or not opened yet)
    error = leader_epoch_error(partition, current_leader_epoch)
    if error != ErrorCode.NONE:
        return error
    if require_leader and partition.leader != broker.node_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # a follower replica: its log, not the leader
    return Located(partition, log)


def leader_epoch_error(partition: PartitionImage, current_leader_epoch: int) -> ErrorCode:
    if current_leader_epoch == NO_LEADER_EPOCH:
        return ErrorCode.NONE
    if partition.leader_epoch > current_leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if partition.leader_epoch < current_leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


class MinIsrCache:
    """min.insync.replicas per topic, recomputed only when the metadata image changes."""

    def __init__(self) -> None:
        self._image: MetadataImage | None = None
        self._values: dict[str, int] = {}

    def get(self, broker: BrokerCore, topic: str) -> int:
        image = broker.image
        if image is not self._image:
            self._image, self._values = image, {}
        value = self._values.get(topic)
        if value is None:
            overrides = image.topic_config_overrides(topic)
            value = topic_min_insync_replicas(broker.effective_config, overrides)
            self._values[topic] = value
        return value
