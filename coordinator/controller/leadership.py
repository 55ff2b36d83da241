"""ElectLeaders (API 43), the automatic preferred-leader rebalance and the unclean-election sweep.

All three plan PartitionChangeRecords with `election.plan_change`; none reads a clock (the
drivers decide when the periodic ones run).

ElectLeaders, per partition, in Kafka's order (ReplicationControlManager.electLeader):

| the partition ...                                           | answer                         |
|-------------------------------------------------------------|--------------------------------|
| topic or partition unknown                                  | UNKNOWN_TOPIC_OR_PARTITION ("No such topic as t" / "No such partition as t-p") |
| PREFERRED: already led by its first replica                 | ELECTION_NOT_NEEDED            |
| UNCLEAN: has a leader                                       | ELECTION_NOT_NEEDED            |
| PREFERRED: nothing would change (first replica not in the ISR or not active) | PREFERRED_LEADER_NOT_AVAILABLE |
| UNCLEAN: no replica can lead                                | ELIGIBLE_LEADERS_NOT_AVAILABLE |

A null topic list means every partition of every topic: each topic gets an entry, without the
partitions that need no election. An unknown election type fails every named partition and the
top level with INVALID_REQUEST ("Unknown election type N"). An UNCLEAN request elects outside the ISR whatever the topic's
`unclean.leader.election.enable` says (it is the operator's explicit choice).

`balance_leaders` is `auto.leader.rebalance.enable`: a PREFERRED election for every partition
not led by its first replica, at most MAX_ELECTIONS_PER_IMBALANCE at a time (the response says
whether more may remain). `elect_unclean_leaders` gives leaderless partitions of topics with
unclean election enabled a leader outside the ISR (the periodic check that makes a dynamic
change of the config take effect).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

from strom.coordinator.controller.election import (
    Election,
    elr_min_isr,
    is_active,
    merge,
    plan_change,
    preferred_leader,
    unclean_enabled,
)
from strom.coordinator.controller.result import ApiError, ControllerResult
from strom.coordinator.metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from strom.wire.errors import ErrorCode
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.coordinator.controller.result import Context
    from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse

PREFERRED, UNCLEAN = 0, 1
"""ElectLeaders' electionType values."""
MAX_ELECTIONS_PER_IMBALANCE = 1000
"""Kafka's cap on the preferred elections one rebalance pass writes."""


def elect_leaders(
    context: Context, request: ElectLeadersRequest, version: int
) -> ControllerResult[ElectLeadersResponse]:
    from strom.wire.messages.elect_leaders import ElectLeadersResponse

    election_type = request.election_type if version >= 1 else PREFERRED
    Result = ElectLeadersResponse.ReplicaElectionResult
    Partition = ElectLeadersResponse.PartitionResult
    response = ElectLeadersResponse()
    if election_type not in (PREFERRED, UNCLEAN):
        message = f"Unknown election type {election_type}"
        response.error_code = ErrorCode.INVALID_REQUEST
        response.replica_election_results = [
            Result(
                t.topic, [Partition(p, ErrorCode.INVALID_REQUEST, message) for p in t.partitions]
            )
            for t in request.topic_partitions or []
        ]
        return ControllerResult(response)
    image = context.image
    planner = _Planner(image, context.config.min_insync_replicas)
    results = response.replica_election_results
    if request.topic_partitions is None:
        for name in image.topic_names():  # every topic has an entry, maybe empty (as Kafka)
            topic = image.topic(name)
            assert topic is not None
            entry = Result(topic=name)
            results.append(entry)
            for partition_id in sorted(topic.partitions):
                error = planner.elect(name, partition_id, election_type)
                if error.code != ErrorCode.ELECTION_NOT_NEEDED:
                    entry.partition_result.append(
                        Partition(partition_id, error.code, error.message)
                    )
    else:
        for wanted in request.topic_partitions:  # one entry per requested topic entry
            entry = Result(topic=wanted.topic)
            results.append(entry)
            for partition_id in wanted.partitions:
                error = planner.elect(wanted.topic, partition_id, election_type)
                entry.partition_result.append(Partition(partition_id, error.code, error.message))
    return ControllerResult(response, planner.records)


class _Planner:
    """Plans changes against the image plus the changes planned so far in one command."""

    def __init__(self, image: MetadataImage, min_isr_default: int) -> None:
        self.image = image
        self.min_isr_default = min_isr_default
        self.records: list[Message] = []
        self._planned: dict[tuple[uuid.UUID, int], PartitionImage] = {}

    def current(self, topic: TopicImage, partition_id: int) -> PartitionImage | None:
        planned = self._planned.get((topic.topic_id, partition_id))
        return planned if planned is not None else topic.partition(partition_id)

    def change(self, topic: TopicImage, partition: PartitionImage, election: Election) -> bool:
        record = plan_change(
            topic.topic_id,
            partition,
            lambda b: is_active(self.image, b),
            election=election,
            min_isr=elr_min_isr(self.image, self.min_isr_default, topic.name),
        )
        if record is None:
            return False
        self.records.append(record)
        self._planned[(topic.topic_id, partition.partition_id)] = merge(partition, record)
        return True

    def elect(self, name: str, partition_id: int, election_type: int) -> ApiError:
        topic = self.image.topic(name)
        if topic is None:
            return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
        partition = self.current(topic, partition_id)
        if partition is None:
            return ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"No such partition as {name}-{partition_id}",
            )
        if election_type == PREFERRED and partition.leader == preferred_leader(partition):
            return ApiError(ErrorCode.ELECTION_NOT_NEEDED)
        if election_type == UNCLEAN and partition.leader != NO_LEADER:
            return ApiError(ErrorCode.ELECTION_NOT_NEEDED)
        election = Election.PREFERRED if election_type == PREFERRED else Election.UNCLEAN
        if not self.change(topic, partition, election):
            if election_type == PREFERRED:
                return ApiError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
            return ApiError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return ApiError(ErrorCode.NONE)


def _partitions(image: MetadataImage) -> Iterator[tuple[TopicImage, PartitionImage]]:
    for name in image.topic_names():
        topic = image.topic(name)
        assert topic is not None
        for partition_id in sorted(topic.partitions):
            yield topic, topic.partitions[partition_id]


def imbalanced(image: MetadataImage) -> bool:
    """Some partition is not led by its first (preferred) replica."""
    return any(p.leader != preferred_leader(p) for _, p in _partitions(image))


def balance_leaders(
    image: MetadataImage, limit: int = MAX_ELECTIONS_PER_IMBALANCE, *, min_isr_default: int = 1
) -> ControllerResult[bool]:
    """Preferred elections where the first replica is in the ISR and active but does not lead;
    the response is True when `limit` cut the pass short (run it again at once).
    `min_isr_default`: the effective min.insync.replicas (used with ELR enabled)."""
    planner = _Planner(image, min_isr_default)
    for topic, partition in _partitions(image):
        if partition.leader == preferred_leader(partition):
            continue
        if len(planner.records) >= limit:
            return ControllerResult(True, planner.records)
        planner.change(topic, partition, Election.PREFERRED)
    return ControllerResult(False, planner.records)


def elect_unclean_leaders(
    image: MetadataImage, default: bool, min_isr_default: int = 1
) -> ControllerResult[int]:
    """Leaders, from outside the ISR if need be, for the leaderless partitions of topics whose
    `unclean.leader.election.enable` is true (`default`: the broker's effective value); the
    response is how many partitions got one."""
    planner = _Planner(image, min_isr_default)
    elected = 0
    for topic, partition in _partitions(image):
        if partition.leader != NO_LEADER or not unclean_enabled(image, default, topic.name):
            continue
        if planner.change(topic, partition, Election.UNCLEAN):
            elected += 1
    return ControllerResult(elected, planner.records)
