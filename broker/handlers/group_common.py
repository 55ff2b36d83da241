"""What the group handlers share: finding the coordinator and the topic checks Kafka does first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from strom.broker.security.authorization import allowed
from strom.coordinator.groups.api import CommitPartition
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.drivers.groups import GroupDriver
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState


def group_driver(broker: BrokerState) -> GroupDriver | None:
    """The coordinator (started on first need), or None before the broker serves (answer
    COORDINATOR_NOT_AVAILABLE)."""
    return broker.group_coordinator()


def client_host(request: RequestContext) -> str:
    """Kafka reports the client address as InetAddress.toString() does: '/127.0.0.1'."""
    return f"/{request.client_host}"


def may_group(
    broker: BrokerState, request: RequestContext, operation: AclOperation, group_id: str
) -> bool:
    """Whether the principal may do `operation` on the group (GROUP_AUTHORIZATION_FAILED)."""
    return allowed(broker, request, operation, ResourceType.GROUP, group_id)


def may_topic(
    broker: BrokerState, request: RequestContext, operation: AclOperation, topic: str
) -> bool:
    """Whether the principal may do `operation` on the topic (TOPIC_AUTHORIZATION_FAILED)."""
    return allowed(broker, request, operation, ResourceType.TOPIC, topic)


def partition_exists(broker: BrokerState, topic: str, partition: int) -> bool:
    return broker.image.partition(topic, partition) is not None


class CommittedPartition(Protocol):
    """A partition of an OffsetCommit or TxnOffsetCommit request."""

    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class CommittedTopic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[CommittedPartition]: ...


def committable_partitions(
    broker: BrokerState, request: RequestContext, group_id: str, topics: Iterable[CommittedTopic]
) -> tuple[list[CommitPartition], dict[tuple[str, int], ErrorCode]]:
    """The commit's partitions the coordinator gets, and the errors of the others, checked as
    Kafka's broker does first: READ on the group (GROUP_AUTHORIZATION_FAILED), READ on each
    topic (TOPIC_AUTHORIZATION_FAILED), then the partition exists
    (UNKNOWN_TOPIC_OR_PARTITION)."""
    valid: list[CommitPartition] = []
    errors: dict[tuple[str, int], ErrorCode] = {}
    group_ok = may_group(broker, request, AclOperation.READ, group_id)
    for topic in topics:
        topic_ok = may_topic(broker, request, AclOperation.READ, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not group_ok:
                errors[key] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif not topic_ok:
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition_exists(broker, topic.name, p.partition_index):
                valid.append(
                    CommitPartition(
                        topic.name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata,
                    )
                )
            else:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return valid, errors
