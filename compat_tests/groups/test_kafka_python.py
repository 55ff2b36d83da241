"""Consumer groups with kafka-python: three members share six partitions, and committed
offsets survive broker restarts."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from compat_tests.groups.ckgroup import ChildMember, produce
from compat_tests.helpers import Deadline, topic_name, wait_until
from compat_tests.kafka_python.kp import KafkaAdminClient, KafkaConsumer, TopicPartition
from strom.broker.testing.embedded import BrokerProcess

TIMEOUT = 30.0


def _consumer(bootstrap: str, group: str, topic: str) -> Any:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        request_timeout_ms=20000,
    )
    # Load the topic's metadata before the first join: kafka-python 3.0.12 otherwise may
    # assign with no partition metadata, rejoin when it arrives, and then (a client bug)
    # spin without ever re-enabling its heartbeat or fetching.
    assert consumer.partitions_for_topic(topic)
    return consumer


def _topic(bootstrap: str, partitions: int) -> str:
    from kafka.admin import NewTopic  # already imported (warnings handled) by kp

    name = topic_name("kp-grp")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


class _Members:
    """kafka-python members of one group, each polling on its own thread as applications do.

    Taking turns on one thread with short polls provokes a kafka-python 3.0.12 bug: a join
    that completes between two polls is discarded and sent again, and a leader that rejoins
    a Stable group starts a new rebalance (Kafka's coordinator does the same), so under load
    the group kept rebalancing. A poll may also block in JoinGroup until the others rejoin.
    """

    def __init__(
        self, bootstrap: str, group: str, topic: str, count: int, *, commit: bool = False
    ) -> None:
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.seen: set[tuple[int, int]] = set()
        self.owned: dict[int, list[int]] = {}
        self._args = (bootstrap, group, topic, commit)
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(count)]

    def _run(self, index: int) -> None:
        bootstrap, group, topic, commit = self._args
        consumer = _consumer(bootstrap, group, topic)
        try:
            while not self.stop.is_set():
                records = consumer.poll(timeout_ms=100)
                with self.lock:
                    for tp, batch in records.items():
                        self.seen.update((tp.partition, r.offset) for r in batch)
                    self.owned[index] = sorted(tp.partition for tp in consumer.assignment())
                if records and commit:
                    consumer.commit()
        finally:
            consumer.close()

    def shares(self) -> list[list[int]]:
        with self.lock:
            return sorted(self.owned.values())

    def seen_now(self) -> set[tuple[int, int]]:
        with self.lock:
            return set(self.seen)

    def __enter__(self) -> _Members:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(30)


def test_three_consumers_share_six_partitions(strom_broker: BrokerProcess) -> None:
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap, 6)
    produce(bootstrap, topic, 6, 5)
    with _Members(bootstrap, "kp-three", topic, 3) as members:

        def shared_out() -> bool:
            shares = members.shares()
            return (
                len(shares) == 3
                and sorted(p for share in shares for p in share) == list(range(6))
                and all(len(share) == 2 for share in shares)
                and len(members.seen_now()) == 30
            )

        wait_until(shared_out, timeout=TIMEOUT, what="three members with two partitions each")


@pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "kill-9"])
def test_committed_offsets_survive_restart(strom_broker: BrokerProcess, clean: bool) -> None:
    topic = _topic(strom_broker.bootstrap, 2)
    produce(strom_broker.bootstrap, topic, 2, 10)
    first = _consumer(strom_broker.bootstrap, "kp-durable", topic)
    try:
        deadline = Deadline(TIMEOUT)
        got = 0
        while got < 20:
            got += sum(len(r) for r in first.poll(timeout_ms=100).values())
            assert not deadline.expired
        from kafka.structs import OffsetAndMetadata

        first.commit(
            {
                TopicPartition(topic, 0): OffsetAndMetadata(7, "kp-meta", -1),
                TopicPartition(topic, 1): OffsetAndMetadata(3, "", -1),
            }
        )
    finally:
        first.close()
    strom_broker.restart(clean=clean)
    second = _consumer(strom_broker.bootstrap, "kp-durable", topic)
    try:
        assert second.committed(TopicPartition(topic, 0)) == 7
        assert second.committed(TopicPartition(topic, 1)) == 3
        deadline = Deadline(TIMEOUT)
        firsts: dict[int, int] = {}
        while len(firsts) < 2:
            for tp, records in second.poll(timeout_ms=100).items():
                firsts.setdefault(tp.partition, records[0].offset)
            assert not deadline.expired
        assert firsts == {0: 7, 1: 3}
    finally:
        second.close()
    admin = KafkaAdminClient(bootstrap_servers=strom_broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({"kp-durable": None})
        assert {tp.partition: o.offset for tp, o in offsets["kp-durable"].items()} == {0: 7, 1: 3}
        assert offsets["kp-durable"][TopicPartition(topic, 0)].metadata == "kp-meta"
    finally:
        admin.close()


def test_killed_member_partitions_move(strom_broker: BrokerProcess) -> None:
    """A kafka-python member killed with SIGKILL: the two others take its partitions within
    its 6 s session, and every record is consumed at least once."""
    bootstrap = strom_broker.bootstrap
    topic = _topic(bootstrap, 6)
    produce(bootstrap, topic, 6, 20)
    child = ChildMember(bootstrap, "kp-failover", topic, client="kafka-python", delay="0.05")
    survivors = _Members(bootstrap, "kp-failover", topic, 2, commit=True)
    try:
        wait_until(lambda: child.snapshot()[0] or None, timeout=TIMEOUT, what="child assignment")
        with survivors:

            def share_sizes() -> list[int]:
                return sorted(len(share) for share in survivors.shares())

            wait_until(
                lambda: share_sizes() == [2, 2] and len(child.snapshot()[0]) == 2,
                timeout=TIMEOUT,
                what="three members sharing the topic",
            )
            child.kill()
            killed = time.monotonic()
            wait_until(lambda: share_sizes() == [3, 3], timeout=20, what="the partitions to move")
            assert time.monotonic() - killed < 6 + 6
            everything = {(p, o) for p in range(6) for o in range(20)}
            wait_until(
                lambda: everything <= survivors.seen_now() | set(child.snapshot()[1]),
                timeout=TIMEOUT,
                what="every record (at least once)",
            )
    finally:
        child.kill()
