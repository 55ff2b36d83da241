"""A partition's leader and offline replicas as Metadata and DescribeTopicPartitions
report them: derived in one place from the image and the replica liveness brokers
report to the controller (`strom.coordinator.controller.liveness`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.coordinator.controller.liveness import Leadership, OfflineReplicas, partition_leadership
from strom.coordinator.metadata.image import NO_LEADER

if TYPE_CHECKING:
    import uuid

    from strom.broker.core_state import BrokerCore
    from strom.coordinator.metadata.image import MetadataImage, PartitionImage


def leadership(
    broker: BrokerCore,
    image: MetadataImage,
    topic_id: uuid.UUID,
    partition: PartitionImage,
    listener: str,
) -> Leadership:
    """The leader clients may use (-1: none) and the replicas that are offline."""
    return partition_leadership(
        topic_id,
        partition,
        broker.offline_replicas,
        lambda replica: reachable(broker, image, replica, listener),
    )


def reachable(broker: BrokerCore, image: MetadataImage, broker_id: int, listener: str) -> bool:
    """Registered, unfenced and listening on the request's listener."""
    registration = image.broker(broker_id)
    if registration is None or registration.fenced:
        return False
    if broker_id == broker.node_id:
        return any(e.name == listener for e in broker.endpoints)
    return registration.endpoint(listener) is not None


class Leaderships:
    """`leadership` for many partitions of one image on one listener (a Metadata answer for
    every topic), given the brokers `reachable` holds for, found once (Metadata lists exactly
    those: `strom.broker.admin.broker_nodes`). A partition whose replicas are all reachable
    and none reported offline -- nearly every one -- skips the general rule."""

    __slots__ = ("_live", "_offline")

    def __init__(self, reachable: frozenset[int], offline: OfflineReplicas) -> None:
        self._live = reachable
        self._offline = offline

    def of(self, topic_id: uuid.UUID, partition: PartitionImage) -> Leadership:
        """The same answer as `leadership(broker, image, topic_id, partition, listener)`."""
        live = self._live
        if not self._offline and live.issuperset(partition.replicas):
            # no replica is down, so the leader stands if it is one (live) or is reachable
            leader = partition.leader
            return Leadership(leader if leader >= 0 and leader in live else NO_LEADER, [])
        return partition_leadership(topic_id, partition, self._offline, live.__contains__)
