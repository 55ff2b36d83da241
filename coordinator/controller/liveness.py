"""Replica liveness: which replicas their brokers report unable to serve, and what
leadership clients are told as a result.

Kafka: a broker whose log directory fails stops serving the partitions in it and
sends `offlineLogDirs` in its next BrokerHeartbeat. The controller maps those dirs
to the partitions assigned to them (KIP-858 directory assignments), moves
leadership away (leader -1 when no other ISR member can take over) and records
the dirs still online in a BrokerRegistrationChangeRecord. Metadata and
DescribeTopicPartitions then answer leader -1 (Metadata: LEADER_NOT_AVAILABLE)
and list the replica among `offline_replicas` (KRaftMetadataCache).

Strom, single node: no other replica can take over, and the metadata log usually
shares the disk that just failed, so the report stays controller state -- as
Kafka keeps its heartbeat state -- rather than records: `OfflineReplicas` holds,
per partition, the brokers whose replica is offline, replaced wholesale by each
broker's report, and `partition_leadership` derives the answer from the image
and it. Strom places logs on its dirs locally, so a broker names the partitions
(an offline dir's, and those it could not open) rather than dir ids. Reports are
not persisted: a restarted broker reports what it then finds. Replication will
add the leader moves on top of the same report.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from strom.coordinator.metadata.image import NO_LEADER, PartitionImage

PartitionKey = tuple[uuid.UUID, int]
"""(topic id, partition index): ids, so a deleted and re-created topic starts clean."""

_NONE: frozenset[int] = frozenset()


@dataclass(frozen=True)
class OfflineReplicas:
    """Brokers whose replica of a partition cannot serve, as their reports last said."""

    by_partition: Mapping[PartitionKey, frozenset[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_partition)

    def of(self, topic_id: uuid.UUID, partition: int) -> frozenset[int]:
        return self.by_partition.get((topic_id, partition), _NONE)

    def reported_by(self, broker_id: int) -> frozenset[PartitionKey]:
        return frozenset(k for k, brokers in self.by_partition.items() if broker_id in brokers)

    def report(self, broker_id: int, partitions: Iterable[PartitionKey]) -> OfflineReplicas:
        """The state after `broker_id` reports exactly `partitions` offline (self if unchanged)."""
        wanted = frozenset(partitions)
        if wanted == self.reported_by(broker_id):
            return self
        merged: dict[PartitionKey, frozenset[int]] = {}
        for key, brokers in self.by_partition.items():
            rest = brokers - {broker_id}
            if rest:
                merged[key] = rest
        for key in wanted:
            merged[key] = merged.get(key, _NONE) | {broker_id}
        return OfflineReplicas(merged)


class Leadership(NamedTuple):
    """What clients are told about one partition's leader and replicas."""

    leader: int
    """The leader, or NO_LEADER when none is elected or its replica cannot serve."""
    offline_replicas: list[int]


def partition_leadership(
    topic_id: uuid.UUID,
    partition: PartitionImage,
    offline: OfflineReplicas,
    reachable: Callable[[int], bool],
) -> Leadership:
    """Kafka's view: a replica is offline if its broker is unreachable (unregistered, fenced,
    no endpoint on the listener) or reported it offline; an offline leader reads -1."""
    reported = offline.of(topic_id, partition.partition_id)
    down = [r for r in partition.replicas if r in reported or not reachable(r)]
    leader = partition.leader
    if leader < 0 or leader in down or (leader not in partition.replicas and not reachable(leader)):
        leader = NO_LEADER
    return Leadership(leader, down)
