"""What the group handlers share: finding the coordinator and the topic checks Kafka does first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from strom.coordinator.groups.api import CommitPartition
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.drivers.groups import GroupDriver
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState


def group_driver(broker: BrokerState) -> GroupDriver | None:
    """The coordinator, or None before it has loaded (answer COORDINATOR_NOT_AVAILABLE)."""
    return broker.groups


def client_host(request: RequestContext) -> str:
    """Kafka reports the client address as InetAddress.toString() does: '/127.0.0.1'."""
    return f"/{request.client_host}"


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


def known_partitions(
    broker: BrokerState, topics: Iterable[CommittedTopic]
) -> tuple[list[CommitPartition], dict[tuple[str, int], ErrorCode]]:
    """The commit's partitions of topics that exist, and UNKNOWN_TOPIC_OR_PARTITION for the
    others (Kafka's broker filters them out before its coordinator sees the commit)."""
    valid: list[CommitPartition] = []
    errors: dict[tuple[str, int], ErrorCode] = {}
    for topic in topics:
        for p in topic.partitions:
            if partition_exists(broker, topic.name, p.partition_index):
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
                errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return valid, errors
