"""Authorized-operations bitfields, as Kafka reports them without an authorizer.

Without ACLs every operation a resource type supports is allowed; Metadata,
DescribeCluster and DescribeGroups report that set as a bitfield over Kafka's
AclOperation codes. The sentinel INT32_MIN means "not requested".
"""

from __future__ import annotations

from enum import IntEnum

NOT_REQUESTED = -(2**31)


class AclOperation(IntEnum):
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def _bits(*ops: AclOperation) -> int:
    return sum(1 << op for op in ops)


TOPIC_OPERATIONS = _bits(
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)
CLUSTER_OPERATIONS = _bits(
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
)
GROUP_OPERATIONS = _bits(AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)


def authorized(requested: bool, operations: int) -> int:
    return operations if requested else NOT_REQUESTED
