"""StandardAuthorizer semantics, pure: patterns, principals and hosts, implied operations,
DENY over ALLOW, super users, allow.everyone.if.no.acl.found, filters, creation checks."""

from __future__ import annotations

import pytest

from strom.coordinator.metadata.acls import (
    AclBinding,
    AclFilter,
    Authorizer,
    PatternType,
    Permission,
    invalid_binding,
)
from strom.coordinator.metadata.acls import (
    AclOperation as Op,
)
from strom.coordinator.metadata.acls import (
    ResourceType as R,
)

ALICE, BOB = "User:alice", "User:bob"


def acl(name: str, op: Op, *, principal: str = ALICE, allow: bool = True,
        pattern: PatternType = PatternType.LITERAL, rtype: R = R.TOPIC, host: str = "*") -> AclBinding:  # fmt: skip
    return AclBinding(rtype, name, pattern, principal, host, op,
                      Permission.ALLOW if allow else Permission.DENY)  # fmt: skip


def test_literal_prefixed_and_wildcard_patterns() -> None:
    authz = Authorizer([
        acl("orders", Op.READ),
        acl("logs-", Op.WRITE, pattern=PatternType.PREFIXED),
        acl("*", Op.DESCRIBE, principal=BOB),
    ])  # fmt: skip
    assert authz.authorize(ALICE, "h", Op.READ, R.TOPIC, "orders")
    assert not authz.authorize(ALICE, "h", Op.READ, R.TOPIC, "orders2")
    assert authz.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "logs-app")
    assert not authz.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "log")
    assert authz.authorize(BOB, "h", Op.DESCRIBE, R.TOPIC, "anything")
    assert not authz.authorize(BOB, "h", Op.READ, R.TOPIC, "anything")
    assert not authz.authorize(ALICE, "h", Op.READ, R.GROUP, "orders")  # another resource type


@pytest.mark.parametrize(
    ("granted", "asked", "allowed"),
    [
        (Op.READ, Op.DESCRIBE, True), (Op.WRITE, Op.DESCRIBE, True),
        (Op.DELETE, Op.DESCRIBE, True), (Op.ALTER, Op.DESCRIBE, True),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True), (Op.ALL, Op.ALTER, True),
        (Op.DESCRIBE, Op.READ, False), (Op.CREATE, Op.DESCRIBE, False),
        (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False), (Op.READ, Op.WRITE, False),
    ],
)  # fmt: skip
def test_implied_operations(granted: Op, asked: Op, allowed: bool) -> None:
    assert Authorizer([acl("t", granted)]).authorize(ALICE, "h", asked, R.TOPIC, "t") is allowed


def test_deny_wins_and_is_not_implied() -> None:
    authz = Authorizer([acl("t", Op.ALL), acl("t", Op.WRITE, allow=False)])
    assert not authz.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "t")
    assert authz.authorize(ALICE, "h", Op.READ, R.TOPIC, "t")
    assert authz.authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "t")  # DENY WRITE denies no DESCRIBE
    everything = Authorizer([acl("t", Op.READ), acl("t", Op.ALL, allow=False, principal="User:*")])
    assert not everything.authorize(ALICE, "h", Op.READ, R.TOPIC, "t")
    prefix_deny = Authorizer([acl("t", Op.READ), acl("", Op.READ, allow=False,
                                                     pattern=PatternType.PREFIXED)])  # fmt: skip
    assert not prefix_deny.authorize(ALICE, "h", Op.READ, R.TOPIC, "t")


def test_principals_hosts_super_users_and_the_default() -> None:
    authz = Authorizer([acl("t", Op.READ, host="10.0.0.1"), acl("t", Op.READ, principal="User:*",
                                                                 host="10.0.0.2")],
                       super_users=["User:admin"])  # fmt: skip
    assert authz.authorize(ALICE, "10.0.0.1", Op.READ, R.TOPIC, "t")
    assert not authz.authorize(ALICE, "10.0.0.3", Op.READ, R.TOPIC, "t")
    assert authz.authorize(BOB, "10.0.0.2", Op.READ, R.TOPIC, "t")
    assert authz.authorize("User:admin", "x", Op.ALTER, R.CLUSTER, "kafka-cluster")
    assert not authz.authorize(ALICE, "x", Op.READ, R.TOPIC, "no-acls")
    open_default = Authorizer([acl("t", Op.READ)], allow_if_no_acl=True)
    assert open_default.authorize(BOB, "x", Op.WRITE, R.TOPIC, "no-acls")
    assert not open_default.authorize(BOB, "x", Op.READ, R.TOPIC, "t")  # ACLs exist: they rule


def test_authorize_on_some_resource_of_a_type() -> None:
    """KIP-679 (idempotent producers): WRITE on any topic."""
    assert Authorizer([acl("t", Op.WRITE)]).authorize_any(ALICE, "h", Op.WRITE, R.TOPIC)
    assert not Authorizer([acl("t", Op.READ)]).authorize_any(ALICE, "h", Op.WRITE, R.TOPIC)
    denied = Authorizer([acl("t", Op.WRITE), acl("*", Op.WRITE, allow=False)])
    assert not denied.authorize_any(ALICE, "h", Op.WRITE, R.TOPIC)


def test_authorized_operations_bitfield() -> None:
    authz = Authorizer([acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS)])
    bits = authz.authorized_operations(ALICE, "h", R.TOPIC, "t")
    assert {op for op in Op if bits & (1 << op)} == {
        Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}  # fmt: skip


def test_filters() -> None:
    acls = [
        acl("orders", Op.READ),
        acl("orders", Op.WRITE, principal=BOB),
        acl("ord", Op.READ, pattern=PatternType.PREFIXED),
        acl("*", Op.DESCRIBE),
        acl("g", Op.READ, rtype=R.GROUP),
    ]

    def matched(f: AclFilter) -> list[AclBinding]:
        return [a for a in acls if f.matches(a)]

    any_ = AclFilter(R.ANY, None, PatternType.ANY, None, None, Op.ANY, Permission.ANY)
    assert matched(any_) == acls
    literal = AclFilter(R.TOPIC, "orders", PatternType.LITERAL, None, None, Op.ANY, Permission.ANY)
    assert matched(literal) == acls[:2]
    match = AclFilter(R.TOPIC, "orders", PatternType.MATCH, None, None, Op.ANY, Permission.ANY)
    assert matched(match) == acls[:4]
    bob = AclFilter(R.ANY, None, PatternType.ANY, BOB, None, Op.WRITE, Permission.ALLOW)
    assert matched(bob) == [acls[1]]


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (AclBinding(R.ANY, "t", 3, ALICE, "*", Op.READ, 3), "Invalid resource type"),
        (AclBinding(R.TOPIC, "t", PatternType.MATCH, ALICE, "*", Op.READ, 3), "Invalid pattern type"),
        (AclBinding(R.TOPIC, "t", 3, ALICE, "*", Op.ANY, 3), "Invalid operation"),
        (AclBinding(R.TOPIC, "t", 3, ALICE, "*", Op.READ, Permission.ANY), "Invalid permission"),
        (AclBinding(R.TOPIC, "t", 3, "alice", "*", Op.READ, 3), "Could not parse principal"),
        (AclBinding(R.CLUSTER, "c", 3, ALICE, "*", Op.ALTER, 3), "kafka-cluster"),
        (AclBinding(R.GROUP, "g", 3, ALICE, "*", Op.WRITE, 3), "not valid for resource type GROUP"),
        (AclBinding(R.TOPIC, "", 3, ALICE, "*", Op.READ, 3), "should not be empty"),
    ],
)  # fmt: skip
def test_invalid_bindings(binding: AclBinding, reason: str) -> None:
    found = invalid_binding(binding)
    assert found is not None
    assert reason in found
