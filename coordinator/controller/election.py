"""Partition leadership: how one partition change is planned, and the elections built on it.

Every change of a partition's leader, ISR or replica set goes through `plan_change`, after
Kafka's PartitionChangeBuilder: the caller states targets (ISR, replicas, adding/removing
replicas, leader recovery state) and an election type; the result is one PartitionChangeRecord
or None when nothing would change. In order:

1. **Reassignment completion.** While replicas are being added or removed, a target ISR that
   holds every adding replica and, without the removing ones, is not empty completes the
   reassignment: the removing replicas leave the replica set and the ISR, adding/removing
   become empty.
2. **Eligible leader replicas** (KIP-966; only with `min_isr`, i.e. the feature
   `eligible.leader.replicas.version` >= 1). A target ISR of at least min.insync.replicas
   members empties the ELR. A smaller one adds to the ELR every member of the current ISR
   that leaves it, keeps the ELR members not in the target ISR, and drops the replicas of an
   unclean shutdown (`unclean_shutdown`) and any replica no longer assigned: while the ISR is
   below min.insync.replicas the leader's high watermark cannot advance (strict min ISR), so
   each of them holds every committed record. The ISR may then become empty.
3. **Election.** A replica is *valid* when it is acceptable (registered, unfenced, not
   shutting down, unless the caller says otherwise) and in the target ISR, or, when that ISR
   is empty, in the ELR. The current leader stays if valid; otherwise the first valid replica
   (in target replica order) leads. A PREFERRED election tries the first replica before
   keeping the current leader. A leader taken from the ELR becomes the ISR alone and leaves the
   ELR (a clean election). With none and ELR enabled, when both ISR and ELR are empty, the last
   known leader (`last_known_elr`, recorded when the ISR emptied) leads if acceptable, as
   before KIP-966 the last ISR member would. With none, an UNCLEAN election takes the first
   acceptable replica outside the ISR. Either of those two is unclean: the ISR becomes just that
   replica, the ELR empties and the leader recovery state becomes RECOVERING (it may lack
   committed records; the new leader reports RECOVERED through AlterPartition once its log is
   settled). Otherwise the partition has no leader (-1).
4. **Epoch bump.** A replica set that loses a member bumps the leader epoch even when the
   leader stays (the record names the unchanged leader).
5. **Last known leader** (ELR enabled): a change that empties the ISR records the leader it
   had in `last_known_elr` (once); a change that leaves the partition led clears it.

Without ELR an empty target ISR leaves the ISR as it is (the last member stays, as Kafka
without ELR does), and a partition that still carries ELR fields (the feature was disabled)
has them emptied by its next clean change.

Unclean elections happen only where `unclean.leader.election.enable` is true for the topic
(`unclean_enabled`: the topic's override, else the cluster's dynamic default, else the static
broker config), except for ElectLeaders with election type UNCLEAN, an operator's explicit
request.
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
MIN_ISR_KEY = "min.insync.replicas"


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


def elr_min_isr(image: MetadataImage, default: int, topic_name: str) -> int | None:
    """The topic's effective min.insync.replicas when eligible leader replicas are enabled,
    else None (plan_change's `min_isr`). `default` is the broker's effective value (dynamic
    cluster default over the static config); the topic's override wins; capped at the
    replication factor (partition 0's replica count), as Kafka's getTopicEffectiveMinIsr."""
    if not image.elr_enabled:
        return None
    value = default
    override = image.topic_config_overrides(topic_name).get(MIN_ISR_KEY)
    if override is not None and override.strip().isdigit():  # validated when written
        value = int(override.strip())
    first = image.partition(topic_name, 0)
    return value if first is None else min(value, len(first.replicas))


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
    min_isr: int | None = None,
    unclean_shutdown: Sequence[int] = (),
) -> PartitionChangeRecord | None:
    """The record that moves `partition` to the targets (see the module docstring); None when
    nothing changes. Unstated targets keep the partition's current values. `min_isr`: the
    topic's min.insync.replicas with eligible leader replicas enabled (None: disabled);
    `unclean_shutdown`: replicas whose broker restarted without a clean shutdown (they leave
    the ELR)."""
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
    elr_enabled = min_isr is not None

    # 2. eligible leader replicas
    target_elr = list(partition.elr)
    if min_isr is not None:
        if len(target_isr) >= min_isr:
            target_elr = []
        else:
            candidates = set(target_elr) | set(partition.isr)
            target_elr = sorted(
                r
                for r in candidates
                if r not in target_isr and r not in unclean_shutdown and r in target_replicas
            )

    # 3. the election
    leader, unclean = _elect(
        partition, acceptable, election, target_isr, target_replicas, target_elr, elr_enabled
    )
    if leader != partition.leader:
        if leader in target_elr:
            target_isr = [leader]
            target_elr = [r for r in target_elr if r != leader]
        record.leader = leader
        if unclean:
            record.isr = [leader]
            if partition.leader_recovery_state != RECOVERING:
                record.leader_recovery_state = RECOVERING

    # 4. a replica set that loses a member bumps the leader epoch
    if record.leader == NO_LEADER_CHANGE and not set(partition.replicas) <= set(target_replicas):
        record.leader = partition.leader

    if record.isr is not None or not elr_enabled:
        target_elr = []  # an unclean election, or ELR disabled: no eligible replicas
    if target_elr != list(partition.elr):
        record.eligible_leader_replicas = target_elr
    if (
        record.isr is None
        and (target_isr or elr_enabled)
        and target_isr != list(partition.isr)
    ):
        record.isr = target_isr

    # 5. the last known leader
    if elr_enabled:
        if (
            record.isr == []
            and partition.leader >= 0
            and partition.last_known_elr != (partition.leader,)
        ):
            record.last_known_elr = [partition.leader]
        elif partition.last_known_elr and (
            record.leader >= 0 or (partition.leader != NO_LEADER and record.leader != NO_LEADER)
        ):
            record.last_known_elr = []
    elif partition.last_known_elr:
        record.last_known_elr = []
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
        and record.eligible_leader_replicas is None
        and record.last_known_elr is None
    ):
        return None
    return record


def _elect(
    partition: PartitionImage,
    acceptable: Callable[[int], bool],
    election: Election,
    isr: list[int],
    replicas: list[int],
    elr: list[int],
    elr_enabled: bool,
) -> tuple[int, bool]:
    """(leader, whether the election was unclean)."""

    def valid(replica: int) -> bool:
        return (replica in isr or (not isr and replica in elr)) and acceptable(replica)

    if election is Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if valid(partition.leader):
        return partition.leader, False
    for replica in replicas:
        if valid(replica):
            return replica, False
    if (
        elr_enabled
        and not isr
        and not elr
        and len(partition.last_known_elr) == 1
        and partition.last_known_elr[0] in replicas
        and acceptable(partition.last_known_elr[0])
    ):
        return partition.last_known_elr[0], True
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
        field(record.eligible_leader_replicas, partition.elr),
        field(record.last_known_elr, partition.last_known_elr),
    )


def preferred_leader(partition: PartitionImage) -> int:
    """The first replica (Kafka's preferred replica); -1 for an empty replica set."""
    return partition.replicas[0] if partition.replicas else NO_LEADER
