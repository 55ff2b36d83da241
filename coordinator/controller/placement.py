"""Where new partitions' replicas go, and checks on assignments a client names.

Placement is deterministic: brokers that may lead (unfenced, not shutting
down) first, then fenced ones, in a ring; partition p's first replica (its
leader) is the broker at position p mod (#unfenced), so leadership rotates
over the unfenced brokers, and its other replicas follow it in the ring.

Rack-aware (`broker.rack`) when the brokers are on more than one rack (a broker
without a rack counts as a rack of its own, as Kafka's KRaft placer treats it):
the ring alternates racks (racks by name, brokers by id within a rack), and a
partition's replicas are taken from the ring, from its leader on, skipping
brokers on racks it already has until every rack has one of its replicas; so
replication factor <= #racks puts every replica on a different rack. On one
rack the ring is simply the brokers by id. Kafka's striped placer does the
same striping, randomised; the error cases and messages are Kafka's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from strom.coordinator.controller.result import ApiError, ControllerError
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.partition_record import PartitionRecord

MAX_PARTITIONS_PER_REQUEST = 10_000
"""The most partitions one CreateTopics or CreatePartitions may add (Kafka's controller limit)."""
TOO_MANY_PARTITIONS = ApiError(
    ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request."
)
"""What every topic of a request over MAX_PARTITIONS_PER_REQUEST answers."""


def place(
    image: MetadataImage, start_partition: int, num_partitions: int, replication_factor: int
) -> list[list[int]]:
    """Replica lists for partitions start..start+n-1; INVALID_REPLICATION_FACTOR if impossible."""
    chosen = placer(image, replication_factor)
    return [
        chosen.replicas(p) for p in range(start_partition, start_partition + num_partitions)
    ]


class Placer:
    """Replica lists for new partitions by index, over the brokers as `placer` found them."""

    def __init__(
        self, ring: list[int], leaders: int, replication_factor: int, racks: dict[int, str | None]
    ) -> None:
        self._ring = ring
        self._leaders = leaders
        self._factor = replication_factor
        self._racks = racks

    def replicas(self, partition: int) -> list[int]:
        """Partition `partition`'s replicas, its leader first."""
        return _replicas(self._ring, partition % self._leaders, self._factor, self._racks)


def placer(image: MetadataImage, replication_factor: int) -> Placer:
    """Where the image's brokers put new partitions' replicas (`place` for many at once, or
    one at a time); INVALID_REPLICATION_FACTOR if impossible."""
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
    racks = {b.broker_id: b.rack or None for b in usable}  # "" is no rack, like null
    ring = _alternate_racks(unfenced, racks) + _alternate_racks(
        [b.broker_id for b in usable if b.fenced], racks
    )
    return Placer(ring, len(unfenced), replication_factor, racks)


def _alternate_racks(brokers: list[int], racks: dict[int, str | None]) -> list[int]:
    """The brokers with racks alternating: the first of each rack, then the second, ..."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(racks[broker_id], []).append(broker_id)
    if len(by_rack) <= 1:
        return sorted(brokers)
    columns = [by_rack[rack] for rack in sorted(by_rack, key=lambda r: (r is None, r or ""))]
    return [c[i] for i in range(max(map(len, columns))) for c in columns if i < len(c)]


def _replicas(
    ring: list[int], start: int, replication_factor: int, racks: dict[int, str | None]
) -> list[int]:
    """`replication_factor` brokers from `ring[start]` on, one per rack while racks remain."""
    order = ring[start:] + ring[:start]
    all_racks = {racks[b] for b in ring}
    chosen: list[int] = []
    used: set[str | None] = set()
    for broker_id in order:
        if len(chosen) == replication_factor:
            return chosen
        if racks[broker_id] not in used:
            chosen.append(broker_id)
            used.add(racks[broker_id])
            if used == all_racks:
                used = set()  # every rack has one: the next round may use each again
    for broker_id in order:
        if len(chosen) == replication_factor:
            break
        if broker_id not in chosen:
            chosen.append(broker_id)
    return chosen


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
