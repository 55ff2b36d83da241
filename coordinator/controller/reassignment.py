"""AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46).

A reassignment moves a partition to a target replica list the way Kafka's KRaft controller
does (ReplicationControlManager, PartitionReassignmentReplicas):

- **Start.** From the current replicas R and the target T: removing = R - T, adding = T - R
  (each sorted), and the replica set becomes T followed by the removing replicas. The ISR is
  left alone: the adding replicas start as followers outside it.
- **Progress.** The partition leader adds each new replica to the ISR through AlterPartition
  once it has caught up. The ISR change that leaves the ISR holding every adding replica (and
  some replica that is not being removed) completes the reassignment in the same record:
  removing replicas leave the replica set and ISR, adding/removing empty. If the leader was
  being removed, a new leader is elected in that record and AlterPartition answers the old one
  NEW_LEADER_ELECTED (see isr.py). A reassignment that only removes replicas completes at once.
- **Epochs.** A record whose replica set loses a member bumps the leader epoch.
- **Cancel.** A null replica list reverts: the adding replicas leave the replica set and ISR, the
  removing ones stay. If that would empty the ISR, the first remaining replica becomes the ISR,
  an unclean election, refused (INVALID_REPLICA_ASSIGNMENT) unless the topic allows unclean
  leader election (the revert's own election is then UNCLEAN too, as in Kafka). Cancelling
  where nothing is in progress: NO_REASSIGNMENT_IN_PROGRESS.
- **Errors**, per partition: UNKNOWN_TOPIC_OR_PARTITION ("Unable to find a topic named t." /
  "Unable to find partition t:p."), INVALID_REPLICA_ASSIGNMENT for an empty, duplicated or
  unregistered target (CreateTopics' manual-assignment messages).

Reassigning to the current replicas (with none in progress) changes nothing and succeeds.
ListPartitionReassignments reads the image: every partition with adding or removing replicas
(null topics), or those of the named topics and partitions; unknown names are left out.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from strom.coordinator.controller.election import (
    Election,
    elr_min_isr,
    is_active,
    merge,
    plan_change,
    unclean_enabled,
)
from strom.coordinator.controller.placement import check_manual_assignment
from strom.coordinator.controller.result import ApiError, ControllerError, ControllerResult
from strom.coordinator.metadata.image import MetadataImage, PartitionImage
from strom.wire.errors import ErrorCode
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.coordinator.controller.result import Context
    from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
    from strom.wire.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    )
    from strom.wire.messages.list_partition_reassignments import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )


def reassigning(partition: PartitionImage) -> bool:
    return bool(partition.adding_replicas or partition.removing_replicas)


def alter_partition_reassignments(
    context: Context, request: AlterPartitionReassignmentsRequest, _version: int
) -> ControllerResult[AlterPartitionReassignmentsResponse]:
    from strom.wire.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsResponse as Response,
    )

    image = context.image
    records: list[Message] = []
    planned: dict[tuple[uuid.UUID, int], PartitionImage] = {}
    response = Response(error_message=None)
    for wanted in request.topics:
        answers: list[Response.ReassignablePartitionResponse] = []
        response.responses.append(Response.ReassignableTopicResponse(wanted.name, answers))
        for target in wanted.partitions:
            error = ApiError(ErrorCode.NONE)
            try:
                topic = image.topic(wanted.name)
                if topic is None:
                    raise ControllerError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Unable to find a topic named {wanted.name}.",
                    )
                key = (topic.topic_id, target.partition_index)
                partition = planned.get(key) or topic.partition(target.partition_index)
                if partition is None:
                    raise ControllerError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Unable to find partition {wanted.name}:{target.partition_index}.",
                    )
                min_isr = elr_min_isr(image, context.config.min_insync_replicas, wanted.name)
                if target.replicas is None:
                    unclean = unclean_enabled(
                        image, context.config.unclean_leader_election_enable, wanted.name
                    )
                    record = _cancel(
                        image, topic.topic_id, wanted.name, partition, unclean, min_isr
                    )
                else:
                    record = _change(
                        image, topic.topic_id, partition, target.replicas, min_isr
                    )
                if record is not None:
                    records.append(record)
                    planned[key] = merge(partition, record)
            except ControllerError as exc:
                error = exc.error
            answers.append(
                Response.ReassignablePartitionResponse(
                    target.partition_index, error.code, error.message
                )
            )
    return ControllerResult(response, records)


def _change(
    image: MetadataImage,
    topic_id: uuid.UUID,
    partition: PartitionImage,
    target: list[int],
    min_isr: int | None,
) -> PartitionChangeRecord | None:
    check_manual_assignment(image, target, None)
    current = list(partition.replicas)
    removing = sorted(set(current) - set(target))
    adding = sorted(set(target) - set(current))
    replicas = list(target) + removing
    return plan_change(
        topic_id,
        partition,
        lambda b: is_active(image, b),
        replicas=replicas if replicas != current else None,
        removing=removing or None,
        adding=adding or None,
        min_isr=min_isr,
    )


def _cancel(
    image: MetadataImage,
    topic_id: uuid.UUID,
    name: str,
    partition: PartitionImage,
    unclean_allowed: bool,
    min_isr: int | None,
) -> PartitionChangeRecord | None:
    if not reassigning(partition):
        raise ControllerError(
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
        )
    adding = set(partition.adding_replicas)
    replicas = [r for r in partition.replicas if r not in adding]
    isr = [r for r in partition.isr if r not in adding]
    if not isr:
        if not replicas:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Invalid replica assignment: addingReplicas contains all replicas.",
            )
        if not unclean_allowed:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {name}:{partition.partition_id} "
                "because it would require an unclean leader election.",
            )
        isr = [replicas[0]]
    return plan_change(
        topic_id,
        partition,
        lambda b: is_active(image, b),
        election=Election.UNCLEAN if unclean_allowed else Election.ONLINE,
        replicas=replicas,
        isr=isr,
        removing=[],
        adding=[],
        min_isr=min_isr,
    )


def list_partition_reassignments(
    image: MetadataImage, request: ListPartitionReassignmentsRequest, _version: int
) -> ListPartitionReassignmentsResponse:
    from strom.wire.messages.list_partition_reassignments import (
        ListPartitionReassignmentsResponse as Response,
    )

    response = Response(error_message=None)
    if request.topics is None:
        wanted = [
            (name, sorted(topic.partitions))
            for name in image.topic_names()
            if (topic := image.topic(name)) is not None
        ]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in request.topics]
    for name, partition_ids in wanted:
        topic = image.topic(name)
        if topic is None:
            continue
        ongoing = [
            Response.OngoingPartitionReassignment(
                partition_index=p.partition_id,
                replicas=list(p.replicas),
                adding_replicas=list(p.adding_replicas),
                removing_replicas=list(p.removing_replicas),
            )
            for i in partition_ids
            if (p := topic.partition(i)) is not None and reassigning(p)
        ]
        if ongoing:
            response.topics.append(Response.OngoingTopicReassignment(name, ongoing))
    return response
