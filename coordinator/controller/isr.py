"""AlterPartition (API 56): a partition leader asks the controller to change its ISR.

The leader of a replicated partition shrinks its in-sync replica set when a follower falls
behind (`replica.lag.time.max.ms`) and expands it when the follower catches up; only the
controller may write the change, as a PartitionChangeRecord, which bumps the partition epoch.
Both epochs fence stale requests, checked in Kafka's order (ReplicationControlManager):

| the request's ...                          | answer                  |
|--------------------------------------------|-------------------------|
| broker is not registered with that epoch   | STALE_BROKER_EPOCH (top level, nothing else read) |
| topic id is unknown                        | UNKNOWN_TOPIC_ID        |
| partition is unknown                       | UNKNOWN_TOPIC_OR_PARTITION |
| leader or partition epoch is *newer*       | NOT_CONTROLLER (this controller is behind: ask the new one) |
| leader epoch is older                      | FENCED_LEADER_EPOCH     |
| broker is not the partition's leader       | INVALID_REQUEST         |
| partition epoch is older                   | INVALID_UPDATE_VERSION  |
| ISR not a duplicate-free subset of the replicas, or without the leader | INVALID_REQUEST |
| ISR > 1 while RECOVERING, or RECOVERED -> RECOVERING | INVALID_REQUEST |
| a new member unregistered, fenced, shutting down, or of another broker epoch | INELIGIBLE_REPLICA |

A valid request that changes nothing writes nothing and answers the current state; one that
changes the ISR (or the leader recovery state) answers the state after its record. The record
is planned like every partition change (`election.plan_change`): an ISR that now holds every
replica a reassignment is adding completes that reassignment (see reassignment.py), and when
that takes the requesting leader out of the replica set a new leader is elected in the same
record and the answer is NEW_LEADER_ELECTED (Kafka's FENCED_LEADER_EPOCH for versions below 2
does not arise: 2 is the oldest served), with no partition state: the old leader learns the new
state from the metadata. Where the topic allows unclean leader election the plan may elect
outside the ISR, as Kafka's does. With eligible leader replicas enabled, a shrink below the
topic's min.insync.replicas moves the leavers into the ELR and an ISR of at least
min.insync.replicas empties it (election.py).
"""

from __future__ import annotations

from strom.coordinator.controller.election import (
    NO_LEADER_CHANGE,
    Election,
    elr_min_isr,
    is_active,
    merge,
    plan_change,
    unclean_enabled,
)
from strom.coordinator.controller.result import ControllerResult
from strom.coordinator.metadata.image import MetadataImage, PartitionImage
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

RECOVERED = 0
RECOVERING = 1
NO_BROKER_EPOCH = -1
"""A member's broker epoch of -1 (and every member in version 2) skips the epoch check."""


def alter_partition(
    image: MetadataImage,
    request: AlterPartitionRequest,
    version: int,
    *,
    unclean_default: bool = False,
    min_isr_default: int = 1,
) -> ControllerResult[AlterPartitionResponse]:
    """Validate each partition's new ISR against `image`; records for the valid changes.

    `unclean_default` and `min_isr_default` are the broker's effective
    unclean.leader.election.enable and min.insync.replicas (a topic's override wins; the
    latter matters only with eligible leader replicas enabled)."""
    registration = image.broker(request.broker_id)
    if registration is None or registration.epoch != request.broker_epoch:
        return ControllerResult(AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), [])
    records: list[Message] = []
    topics: list[AlterPartitionResponse.TopicData] = []
    for topic_data in request.topics:
        answers: list[AlterPartitionResponse.PartitionData] = []
        topics.append(AlterPartitionResponse.TopicData(topic_data.topic_id, answers))
        topic = image.topics_by_id.get(topic_data.topic_id)
        for data in topic_data.partitions:
            if topic is None:
                answers.append(_error(data, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            partition = topic.partition(data.partition_index)
            members = _new_isr(data, version)
            error = _validate(image, request.broker_id, partition, data, members)
            if error is not ErrorCode.NONE or partition is None:
                answers.append(_error(data, error))
                continue
            isr = [broker_id for broker_id, _ in members]
            unclean = unclean_enabled(image, unclean_default, topic.name)
            record = plan_change(
                topic.topic_id,
                partition,
                lambda b: is_active(image, b),
                election=Election.UNCLEAN if unclean else Election.ONLINE,
                isr=isr,
                recovery=data.leader_recovery_state,
                min_isr=elr_min_isr(image, min_isr_default, topic.name),
            )
            after = partition
            if record is not None:
                records.append(record)
                after = merge(partition, record)
                if record.leader not in (NO_LEADER_CHANGE, request.broker_id):
                    moved = ErrorCode.NEW_LEADER_ELECTED
                    answers.append(
                        _error(data, moved if version > 1 else ErrorCode.FENCED_LEADER_EPOCH)
                    )
                    continue
            answers.append(
                AlterPartitionResponse.PartitionData(
                    partition_index=after.partition_id,
                    leader_id=after.leader,
                    leader_epoch=after.leader_epoch,
                    isr=list(after.isr),
                    leader_recovery_state=after.leader_recovery_state,
                    partition_epoch=after.partition_epoch,
                )
            )
    return ControllerResult(AlterPartitionResponse(topics=topics), records)


def _new_isr(data: AlterPartitionRequest.PartitionData, version: int) -> list[tuple[int, int]]:
    """(broker id, broker epoch) of each proposed member; version 2 carries no epochs."""
    if version < 3:
        return [(broker_id, NO_BROKER_EPOCH) for broker_id in data.new_isr]
    return [(member.broker_id, member.broker_epoch) for member in data.new_isr_with_epochs]


def _validate(
    image: MetadataImage,
    broker_id: int,
    partition: PartitionImage | None,
    data: AlterPartitionRequest.PartitionData,
    members: list[tuple[int, int]],
) -> ErrorCode:
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if (
        data.leader_epoch > partition.leader_epoch
        or data.partition_epoch > partition.partition_epoch
    ):
        return ErrorCode.NOT_CONTROLLER
    if data.leader_epoch < partition.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if broker_id != partition.leader:
        return ErrorCode.INVALID_REQUEST
    if data.partition_epoch < partition.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    isr = [member for member, _ in members]
    if (
        not isr
        or len(set(isr)) != len(isr)
        or not set(isr) <= set(partition.replicas)
        or partition.leader not in isr
    ):
        return ErrorCode.INVALID_REQUEST
    if data.leader_recovery_state not in (RECOVERED, RECOVERING):
        return ErrorCode.INVALID_REQUEST
    if data.leader_recovery_state == RECOVERING and len(isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if partition.leader_recovery_state == RECOVERED and data.leader_recovery_state == RECOVERING:
        return ErrorCode.INVALID_REQUEST
    for member, epoch in members:
        registration = image.broker(member)
        if (
            registration is None
            or not registration.active
            or (epoch != NO_BROKER_EPOCH and registration.epoch != epoch)
        ):
            return ErrorCode.INELIGIBLE_REPLICA
    return ErrorCode.NONE


def _error(
    data: AlterPartitionRequest.PartitionData, error: ErrorCode
) -> AlterPartitionResponse.PartitionData:
    return AlterPartitionResponse.PartitionData(
        partition_index=data.partition_index, error_code=error
    )
