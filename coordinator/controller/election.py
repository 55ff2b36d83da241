"""Partition leadership: how one partition change is planned, and the elections built on it.

Every change of a partition's leader, ISR or replica set goes through `plan_change`, after
Kafka's PartitionChangeBuilder: the caller states targets (ISR, replicas, adding/removing
replicas, leader recovery state) and an election type; the result is one PartitionChangeRecord
or None when nothing would change. In order:

1. **Reassignment completion.** While replicas are being added or removed, a target ISR that
   holds every adding replica and, without the removing ones, is not empty completes the
   reassignment: the removing replicas leave the replica set and the ISR, adding/removing
   become empty.
2. **Election.** The current leader stays if it is in the target ISR and acceptable (registered,
   unfenced, not shutting down, unless the caller says otherwise). Otherwise the first replica
   (in target replica order) that is in the ISR and acceptable leads. A PREFERRED election tries
   the first replica before keeping the current leader. With none, an UNCLEAN election takes the
   first acceptable replica outside the ISR: the ISR becomes just that replica and the leader
   recovery state RECOVERING (it may lack committed records; the new leader reports RECOVERED
   through AlterPartition once its log is settled). Otherwise the partition has no leader (-1).
3. **Epoch bump.** A replica set that loses a member bumps the leader epoch even when the
   leader stays (the record names the unchanged leader).

Unclean elections happen only where `unclean.leader.election.enable` is true for the topic
(`unclean_enabled`: the topic's override, else the cluster's dynamic default, else the static
broker config), except for ElectLeaders with election type UNCLEAN, an operator's explicit
request. Eligible leader replicas (KIP-966) are not implemented: the ISR never empties.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from enum import Enum

from strom.coordinator.metadata.image import NO_LEADER, MetadataImage, PartitionImage
from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord

NO_LEADER_CHANGE = -2
RECOVERED = 0
RECOVERING = 1
UNCLEAN_KEY = "unclean.leader.election.enable"


class Election(Enum):
    """Kafka's PartitionChangeBuilder.Election."""

    ONLINE = 0
    """Keep a valid leader, else the first valid replica; never outside the ISR."""
    PREFERRED = 1
    """The first replica if valid, else as ONLINE."""
    UNCLEAN = 2
    """As ONLINE, then any acceptable replica outside the ISR (data may be lost)."""


def is_active(image: MetadataImage, broker_id: int) -> bool:
    """Registered, unfenced and not in controlled shutdown: may lead."""
    registration = image.broker(broker_id)
    return registration is not None and registration.active


def unclean_enabled(image: MetadataImage, default: bool, topic_name: str) -> bool:
    """`unclean.leader.election.enable` for a topic: its override, else `default` (the
    broker's effective value: dynamic cluster default over the static config)."""
    value = image.topic_config_overrides(topic_name).get(UNCLEAN_KEY)
    return default if value is None else value.strip().lower() == "true"


def plan_change(
    topic_id: uuid.UUID,
    partition: PartitionImage,
    acceptable: Callable[[int], bool],
    *,
    election: Election = Election.ONLINE,
    isr: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    recovery: int | None = None,
) -> PartitionChangeRecord | None:
    """The record that moves `partition` to the targets (see the module docstring); None when
    nothing changes. Unstated targets keep the partition's current values."""
    target_isr = list(partition.isr if isr is None else isr)
    target_replicas = list(partition.replicas if replicas is None else replicas)
    target_removing = list(partition.removing_replicas if removing is None else removing)
    target_adding = list(partition.adding_replicas if adding is None else adding)
    target_recovery = partition.leader_recovery_state if recovery is None else recovery

    # 1. a reassignment the target ISR completes
    if target_removing or target_adding:
        kept_isr = [r for r in target_isr if r not in target_removing]
        if kept_isr and all(r in kept_isr for r in target_adding):
            target_isr = kept_isr
            target_replicas = [r for r in target_replicas if r not in target_removing]
            target_removing, target_adding = [], []

    record = PartitionChangeRecord(partition_id=partition.partition_id, topic_id=topic_id)

    # 2. the election
    leader, unclean = _elect(partition, acceptable, election, target_isr, target_replicas)
    if leader != partition.leader:
        record.leader = leader
        if unclean:
            record.isr = [leader]
            if partition.leader_recovery_state != RECOVERING:
                record.leader_recovery_state = RECOVERING

    # 3. a replica set that loses a member bumps the leader epoch
    if record.leader == NO_LEADER_CHANGE and not set(partition.replicas) <= set(target_replicas):
        record.leader = partition.leader

    if record.isr is None and target_isr and target_isr != list(partition.isr):
        record.isr = target_isr
    if target_replicas and target_replicas != list(partition.replicas):
        record.replicas = target_replicas
    if target_removing != list(partition.removing_replicas):
        record.removing_replicas = target_removing
    if target_adding != list(partition.adding_replicas):
        record.adding_replicas = target_adding
    if record.leader_recovery_state < 0 and target_recovery != partition.leader_recovery_state:
        record.leader_recovery_state = target_recovery
    if (
        record.leader == NO_LEADER_CHANGE
        and record.isr is None
        and record.replicas is None
        and record.removing_replicas is None
        and record.adding_replicas is None
        and record.leader_recovery_state < 0
    ):
        return None
    return record


def _elect(
    partition: PartitionImage,
    acceptable: Callable[[int], bool],
    election: Election,
    isr: list[int],
    replicas: list[int],
) -> tuple[int, bool]:
    """(leader, whether the election was unclean)."""

    def valid(replica: int) -> bool:
        return replica in isr and acceptable(replica)

    if election is Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if valid(partition.leader):
        return partition.leader, False
    for replica in replicas:
        if valid(replica):
            return replica, False
    if election is Election.UNCLEAN:
        for replica in replicas:
            if acceptable(replica):
                return replica, True
    return NO_LEADER, False


def merge(partition: PartitionImage, record: PartitionChangeRecord) -> PartitionImage:
    """`partition` after `record` (as the metadata delta replays it)."""
    leader, leader_epoch = partition.leader, partition.leader_epoch
    if record.leader != NO_LEADER_CHANGE:
        leader, leader_epoch = record.leader, partition.leader_epoch + 1

    def field(new: list[int] | None, old: tuple[int, ...]) -> tuple[int, ...]:
        return old if new is None else tuple(new)

    return PartitionImage(
        partition.partition_id,
        field(record.replicas, partition.replicas),
        field(record.isr, partition.isr),
        leader,
        leader_epoch,
        partition.partition_epoch + 1,
        field(record.removing_replicas, partition.removing_replicas),
        field(record.adding_replicas, partition.adding_replicas),
        partition.leader_recovery_state
        if record.leader_recovery_state < 0
        else record.leader_recovery_state,
    )


def preferred_leader(partition: PartitionImage) -> int:
    """The first replica (Kafka's preferred replica); -1 for an empty replica set."""
    return partition.replicas[0] if partition.replicas else NO_LEADER
