"""ACLs: what an AccessControlEntryRecord grants or denies, and how they are matched.

The semantics are Kafka's StandardAuthorizer's (its StandardAuthorizerData):

- A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal
  such as `User:alice` or the wildcard `User:*`, host or `*`, operation, ALLOW or DENY).
- A request (principal, host, operation, resource) is matched by bindings whose pattern covers
  the resource (LITERAL with the same name or `*`, PREFIXED with a prefix of the name) and whose
  principal and host match. A matching DENY wins over any ALLOW; DENY on ALL denies everything.
- Implied operations (for ALLOW only): READ, WRITE, DELETE and ALTER imply DESCRIBE;
  ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies every operation.
- No binding at all on the resource (for anyone): `allow.everyone.if.no.acl.found` decides.
  `super.users` are allowed everything.

Filters (DescribeAcls, DeleteAcls) select bindings: ANY resource type / pattern type /
operation / permission, a null name / principal / host matching all, and pattern type MATCH:
every binding that would apply to the named resource. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
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
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

Op = AclOperation
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}),
    Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
}
"""An ALLOW of any of these operations allows the key operation."""

OPERATIONS_OF: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}  # fmt: skip
"""The operations each resource type supports (Kafka's; authorized_operations bitfields)."""


_CONCRETE_TYPES = frozenset(t.value for t in ResourceType) - {ResourceType.ANY, ResourceType.UNKNOWN}
_CONCRETE_OPERATIONS = frozenset(o.value for o in AclOperation) - {Op.ANY, Op.UNKNOWN}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter (None: any value)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != Op.ANY and acl.operation != self.operation:
            return False
        return self.permission == Permission.ANY or acl.permission == self.permission

    def _pattern_matches(self, acl: AclBinding) -> bool:
        wanted = self.pattern_type
        if wanted == PatternType.MATCH:
            if self.resource_name is None:
                return True
            return _pattern_covers(acl, self.resource_name)
        if wanted not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


def _pattern_covers(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD)
    if acl.pattern_type == PatternType.PREFIXED:
        return name.startswith(acl.resource_name)
    return False


def invalid_binding(acl: AclBinding) -> str | None:
    """Why CreateAcls refuses this binding (INVALID_REQUEST), or None."""
    if acl.resource_type not in _CONCRETE_TYPES:
        return "Invalid resource type"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid pattern type"
    if acl.operation not in _CONCRETE_OPERATIONS:
        return "Invalid operation"
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        return "Invalid permission type"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if acl.pattern_type == PatternType.PREFIXED and acl.resource_name == WILDCARD:
        return "A PREFIXED pattern cannot be the wildcard"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{acl.principal}` (no colon is present separating the principal type from name)"
    if not acl.host:
        return "Invalid host"
    if acl.operation not in OPERATIONS_OF.get(ResourceType(acl.resource_type), ()) and acl.operation != Op.ALL:
        return (f"Operation {AclOperation(acl.operation).name} is not valid for resource type "
                f"{ResourceType(acl.resource_type).name}")  # fmt: skip
    return None


class Authorizer:
    """Authorization decisions over one set of ACLs (rebuilt when the ACLs change)."""

    def __init__(
        self,
        acls: Iterable[AclBinding],
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, list[AclBinding]] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(acl.resource_type, []).append(acl)

    def _candidates(self, resource_type: int, name: str) -> list[AclBinding]:
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        found += [a for a in self._prefixed.get(resource_type, ()) if name.startswith(a.resource_name)]
        return found

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: int, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        candidates = self._candidates(resource_type, name)
        if not candidates:
            return self.allow_if_no_acl
        allowed = False
        implied = IMPLIED_BY.get(operation, frozenset({operation}))
        for acl in candidates:
            if acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.host not in (host, WILDCARD):
                continue
            if acl.permission == Permission.DENY:
                if acl.operation in (operation, Op.ALL):
                    return False
            elif acl.operation == Op.ALL or acl.operation in implied:
                allowed = True
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: int
    ) -> bool:
        """Kafka's authorizeByResourceType: would `operation` be allowed on SOME resource of
        this type (no DENY covering every name: LITERAL `*`, PREFIXED "")?"""
        if principal in self.super_users:
            return True
        implied = IMPLIED_BY.get(operation, frozenset({operation}))
        relevant = [
            a for (rtype, _), acls in self._literal.items() if rtype == resource_type for a in acls
        ] + list(self._prefixed.get(resource_type, ()))
        mine = [a for a in relevant if a.principal in (principal, WILDCARD_PRINCIPAL)
                and a.host in (host, WILDCARD)]  # fmt: skip
        denied_everything = any(
            a.permission == Permission.DENY and a.operation in (operation, Op.ALL)
            and ((a.pattern_type == PatternType.LITERAL and a.resource_name == WILDCARD)
                 or (a.pattern_type == PatternType.PREFIXED and a.resource_name == ""))
            for a in mine
        )  # fmt: skip
        if denied_everything:
            return False
        if any(a.permission == Permission.ALLOW and (a.operation == Op.ALL or a.operation in implied)
               for a in mine):  # fmt: skip
            return True
        return self.allow_if_no_acl and not relevant

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bitfield of operations allowed on a resource (authorized_operations fields)."""
        bits = 0
        for op in OPERATIONS_OF.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

