"""Consumer groups with confluent-kafka (librdkafka): balance, failover, restarts, static and
cooperative members, and the Admin API's view of a group."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.groups.ckgroup import ChildMember, Member, balanced, poll_until, produce
from compat_tests.helpers import topic_name, wait_until
from strom.broker.testing.embedded import BrokerProcess

TIMEOUT = 30.0


def _topic(bootstrap: str, partitions: int = 6) -> str:
    name = topic_name("grp")
    admin = ck.admin(bootstrap)
    admin.create_topics([ck.NewTopic(name, partitions, 1)])[name].result(TIMEOUT)
    return name


def test_three_consumers_share_six_partitions(strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap)
    produce(bootstrap, topic, 6, 10)
    members = [Member(bootstrap, "three", [topic]) for _ in range(3)]
    try:
        poll_until(members, lambda: balanced(members, 6), TIMEOUT, "2 partitions each")

        def total() -> int:
            return sum(len(m.consumed) for m in members)

        poll_until(members, lambda: total() >= 60, TIMEOUT, "every record")
        consumed = sorted(rec for m in members for rec in m.consumed)
        assert consumed == sorted((p, o) for p in range(6) for o in range(10))
    finally:
        for m in members:
            m.close()


def test_a_child_member_error_fails_the_test() -> None:
    """The child reports what went wrong (here librdkafka refusing a setting); snapshot() raises."""
    child = ChildMember("127.0.0.1:1", "g", "t", **{"no.such.setting": "1"})
    try:
        child.process.wait(TIMEOUT)
        child._reader.join(TIMEOUT)
        with pytest.raises(AssertionError, match=r"no\.such\.setting"):
            child.snapshot()
    finally:
        child.kill()


def test_killed_member_partitions_move_within_session_timeout(strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap)
    produce(bootstrap, topic, 6, 40)
    child = ChildMember(bootstrap, "failover", topic, delay="0.05")
    members: list[Member] = []
    try:
        wait_until(lambda: child.snapshot()[0] or None, timeout=TIMEOUT, what="child assignment")
        members += [Member(bootstrap, "failover", [topic]) for _ in range(2)]

        def three_way() -> bool:
            owned, consumed = child.snapshot()
            return len(owned) == 2 and all(len(m.owned) == 2 for m in members) and len(consumed) > 2

        poll_until(members, three_way, TIMEOUT, "three members with 2 partitions each")
        child_owned, _ = child.snapshot()
        child.kill()
        killed_at = time.monotonic()
        poll_until(
            members, lambda: balanced(members, 6), 6 + 10, "the dead member's partitions to move"
        )
        moved_after = time.monotonic() - killed_at
        assert moved_after < 6 + 6, moved_after  # session timeout plus a rebalance
        assert child_owned <= set().union(*(m.owned for m in members))
        everything = {(p, o) for p in range(6) for o in range(40)}

        def seen() -> set[tuple[int, int]]:
            return set(child.snapshot()[1]).union(*(m.consumed for m in members))

        poll_until(members, lambda: everything <= seen(), TIMEOUT, "every record (at least once)")
    finally:
        child.kill()
        for m in members:
            m.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "kill-9"])
def test_committed_offsets_survive_broker_restart(strom_broker: BrokerProcess, clean: bool) -> None:
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap, 2)
    produce(bootstrap, topic, 2, 20)
    first = Member(bootstrap, "durable", [topic])
    try:
        poll_until([first], lambda: len(first.consumed) >= 15, TIMEOUT, "15 records")
    finally:
        first.close()
    committed = {p: max(o for q, o in first.consumed if q == p) + 1 for p, _ in first.consumed}
    strom_broker.restart(clean=clean)
    admin = ck.admin(strom_broker.bootstrap)
    request = [ConsumerGroupTopicPartitions("durable")]
    listed = admin.list_consumer_group_offsets(request)["durable"].result(TIMEOUT)
    assert {tp.partition: tp.offset for tp in listed.topic_partitions} == committed
    second = Member(strom_broker.bootstrap, "durable", [topic])
    try:
        remaining = 40 - sum(committed.values())
        poll_until([second], lambda: len(second.consumed) >= remaining, TIMEOUT, "the rest")
        firsts = {p: min(o for q, o in second.consumed if q == p) for p, _ in second.consumed}
        for partition, offset in firsts.items():
            assert offset == committed.get(partition, 0)
    finally:
        second.close()


def test_cooperative_sticky_rebalances_incrementally(strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap)
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(bootstrap, "coop", [topic], **config)
    members = [first]
    try:
        poll_until(members, lambda: len(first.owned) == 6, TIMEOUT, "first member owns all")
        members.append(Member(bootstrap, "coop", [topic], **config))
        poll_until(members, lambda: balanced(members, 6), TIMEOUT, "3 partitions each")
        # Incremental: the first member only gave up what moved, and kept the rest throughout.
        assert all(len(r) <= 3 for r in first.revokes), first.revokes
        assert first.revokes
        assert sum(len(r) for r in first.revokes) == 3
        assert first.assigns[0] == list(range(6))
    finally:
        for m in members:
            m.close()


def test_static_member_restarts_without_rebalance(strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap)
    static = {"group.instance.id": "static-1", "session.timeout.ms": 30000}
    other = Member(bootstrap, "static", [topic], **{"group.instance.id": "static-2"})
    first = Member(bootstrap, "static", [topic], **static)
    members = [other, first]
    try:
        poll_until(members, lambda: balanced(members, 6), TIMEOUT, "3 partitions each")
        before = sorted(first.owned)
        # the other member may have been alone (all 6 partitions, then a revoke) before `first`
        # joined: only what happens from here on counts
        assigns_of_other, revokes_of_other = len(other.assigns), len(other.revokes)
        first.close()  # a static member leaves no LeaveGroup behind
        restarted = Member(bootstrap, "static", [topic], **static)
        members = [other, restarted]
        poll_until(members, lambda: sorted(restarted.owned) == before, TIMEOUT, "same partitions")
        for _ in range(40):  # keep everyone polling: no rebalance may reach the other member
            for m in members:
                m.poll()
        assert len(other.assigns) == assigns_of_other
        assert len(other.revokes) == revokes_of_other
    finally:
        for m in members:
            m.close()


def test_admin_describes_lists_and_deletes_groups(strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap, 2)
    produce(bootstrap, topic, 2, 5)
    admin = ck.admin(bootstrap)
    member = Member(bootstrap, "adm", [topic], **{"client.id": "adm-client"})
    try:
        poll_until([member], lambda: len(member.consumed) >= 10, TIMEOUT, "all records")
        described = admin.describe_consumer_groups(["adm"])["adm"].result(TIMEOUT)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        [m] = described.members
        assert m.client_id == "adm-client"
        assert m.host == "/127.0.0.1"
        assert sorted(tp.partition for tp in m.assignment.topic_partitions) == [0, 1]
        listed = admin.list_consumer_groups().result(TIMEOUT)
        assert "adm" in {g.group_id for g in listed.valid}
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("adm")])
        got = offsets["adm"].result(TIMEOUT)
        assert {(tp.topic, tp.partition, tp.offset) for tp in got.topic_partitions} == {
            (topic, 0, 5), (topic, 1, 5),
        }  # fmt: skip
        busy = admin.delete_consumer_groups(["adm"])["adm"]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            busy.result(TIMEOUT)
    finally:
        member.close()
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("adm", [TopicPartition(topic, 0, 2)])]
    )
    altered["adm"].result(TIMEOUT)
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("adm")])["adm"]
    assert {tp.partition: tp.offset for tp in got.result(TIMEOUT).topic_partitions} == {0: 2, 1: 5}
    assert admin.delete_consumer_groups(["adm"])["adm"].result(TIMEOUT) is None
    listed = admin.list_consumer_groups().result(TIMEOUT)
    assert "adm" not in {g.group_id for g in listed.valid}
