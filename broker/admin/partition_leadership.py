"""A partition's leader and offline replicas as Metadata and DescribeTopicPartitions
report them: derived in one place from the image and the replica liveness brokers
report to the controller (`strom.coordinator.controller.liveness`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.coordinator.controller.liveness import Leadership, partition_leadership

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
