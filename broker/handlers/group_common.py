"""What the group handlers share: finding the coordinator and the topic checks Kafka does first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType

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
