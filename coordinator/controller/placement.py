"""Where new partitions' replicas go, and checks on assignments a client names.

Placement is deterministic (no rack awareness): brokers that may lead
(unfenced, not shutting down) sorted by id, then fenced ones; partition p's
replicas are the `replication_factor` brokers starting at position
p mod (#unfenced), so leadership rotates over unfenced brokers. Kafka's
striped placer is randomised; the error cases and messages are Kafka's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from strom.coordinator.controller.result import ControllerError
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.partition_record import PartitionRecord


def place(
    image: MetadataImage, start_partition: int, num_partitions: int, replication_factor: int
) -> list[list[int]]:
    """Replica lists for partitions start..start+n-1; INVALID_REPLICATION_FACTOR if impossible."""
    if replication_factor <= 0:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Invalid replication factor {replication_factor}: "
            "the replication factor must be positive.",
        )
    usable = [b for b in image.brokers() if not b.in_controlled_shutdown]
    unfenced = [b.broker_id for b in usable if not b.fenced]
    if not unfenced:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced."
        )
    if replication_factor > len(usable):
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The target replication factor of {replication_factor} cannot be reached "
            f"because only {len(usable)} broker(s) are registered.",
        )
    ring = unfenced + [b.broker_id for b in usable if b.fenced]
    return [
        [ring[(p % len(unfenced) + i) % len(ring)] for i in range(replication_factor)]
        for p in range(start_partition, start_partition + num_partitions)
    ]


def check_manual_assignment(
    image: MetadataImage, replicas: Sequence[int], replication_factor: int | None
) -> None:
    """Kafka's rules for a client-chosen replica list; INVALID_REPLICA_ASSIGNMENT if broken."""
    if not replicas:
        raise ControllerError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(replicas):
        if image.broker(broker_id) is None:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, "
                "but no such broker is registered.",
            )
        if broker_id == previous:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise ControllerError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s).",
        )


def active_replicas(image: MetadataImage, replicas: Sequence[int]) -> list[int]:
    """The replicas that can be in the ISR right now (unfenced, not shutting down)."""
    out = []
    for broker_id in replicas:
        broker = image.broker(broker_id)
        if broker is not None and broker.active:
            out.append(broker_id)
    return out


def partition_record(
    topic_id: uuid.UUID, index: int, replicas: Sequence[int], isr: Sequence[int]
) -> PartitionRecord:
    """A new partition: the first in-sync replica leads, epochs start at 0."""
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=list(replicas),
        isr=list(isr),
        leader=isr[0],
        leader_epoch=0,
        partition_epoch=0,
    )
