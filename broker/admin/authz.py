"""Authorized-operations bitfields (Metadata, DescribeCluster, DescribeGroups,
DescribeTopicPartitions), as Kafka reports them.

Without an authorizer every operation a resource type supports is reported; with one, the
operations the ACLs allow the request's principal (`strom.broker.security.authorization`).
The bitfield is over Kafka's AclOperation codes; INT32_MIN means "not requested".
"""

from __future__ import annotations

from strom.broker.security.authorization import Asker, Authorizing, authorizer_of
from strom.coordinator.metadata.acls import AclOperation, ResourceType

NOT_REQUESTED = -(2**31)


def _bits(*ops: AclOperation) -> int:
    return sum(1 << op for op in ops)


A = AclOperation
TOPIC_OPERATIONS = _bits(
    A.READ, A.WRITE, A.CREATE, A.DELETE, A.ALTER, A.DESCRIBE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS
)
CLUSTER_OPERATIONS = _bits(
    A.CREATE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE, A.ALTER,
    A.DESCRIBE,
)  # fmt: skip
GROUP_OPERATIONS = _bits(A.READ, A.DESCRIBE, A.DELETE)
SUPPORTED = {
    ResourceType.TOPIC: TOPIC_OPERATIONS,
    ResourceType.CLUSTER: CLUSTER_OPERATIONS,
    ResourceType.GROUP: GROUP_OPERATIONS,
}


def authorized(
    requested: bool,
    broker: Authorizing,
    request: Asker,
    resource_type: ResourceType,
    name: str,
) -> int:
    """The resource's authorized_operations field: NOT_REQUESTED unless `requested`."""
    if not requested:
        return NOT_REQUESTED
    supported = SUPPORTED[resource_type]
    authorizer = authorizer_of(broker)
    if authorizer is None:
        return supported
    principal, host = str(request.principal), request.client_host
    if not authorizer.authorize(principal, host, AclOperation.DESCRIBE, resource_type, name):
        return 0  # Kafka reports nothing about a resource the principal may not describe
    return sum(
        1 << op
        for op in AclOperation
        if supported & (1 << op) and authorizer.authorize(principal, host, op, resource_type, name)
    )
