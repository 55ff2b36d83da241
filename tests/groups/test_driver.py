"""`GroupDriver` without a broker: a real partition log behind the `CoordinatorTopic` protocol."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from strom.broker.drivers.coordinator_topic import Replicated
from strom.broker.drivers.group_loading import read_partition
from strom.broker.drivers.groups import GroupDriver
from strom.coordinator.groups.api import (
    CommitPartition,
    CommitRequest,
    GroupConfig,
    JoinRequest,
    JoinResult,
)
from strom.coordinator.groups.records import OffsetRecord
from strom.storage import AppendOrigin, LogAppendError, PartitionLog
from strom.storage.log.producer_state import VerificationGuard
from strom.wire.errors import ErrorCode
from tests.broker.test_produce_helpers import wait_for
from tests.log.helpers import Clock, open_log

pytestmark = pytest.mark.trio


class OneLogTopic:
    """`__consumer_offsets` whose partition 0 is led here, in a real log; the others are not."""

    def __init__(self, partition_log: PartitionLog, partitions: int = 1) -> None:
        self.log = partition_log
        self.count = partitions
        self.created = 0
        self.replicated: Replicated | None = None
        """What `append` hands back after appending (None: committed at once)."""

    def partitions(self) -> list[int] | None:
        return list(range(self.count))

    def leader(self, partition: int) -> tuple[PartitionLog, int] | None:
        return (self.log, 3) if partition == 0 else None

    def append(
        self,
        partition: int,
        batch: bytes | bytearray,
        now: int,
        timeout_ms: int | None = None,
        *,
        verification: VerificationGuard | None = None,
    ) -> ErrorCode | Replicated:
        led = self.leader(partition)
        if led is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        try:
            led[0].append(
                batch, led[1], now, origin=AppendOrigin.COORDINATOR, verification=verification
            )
        except LogAppendError as exc:
            return exc.error
        return self.replicated or ErrorCode.NONE

    async def create(self) -> ErrorCode:
        self.created += 1
        return ErrorCode.NONE


def driver_over(topic: OneLogTopic, clock: Clock) -> GroupDriver:
    return GroupDriver(
        topic,
        GroupConfig(initial_rebalance_delay_ms=0),
        num_partitions=1,
        retention_check_interval_ms=600_000,
        clock=clock,
        new_id=lambda: "id",
    )


def request(offset: int) -> CommitRequest:
    return CommitRequest(
        "g", -1, "", [CommitPartition("t", 0, offset), CommitPartition("t", 1, offset)]
    )


def committed(driver: GroupDriver) -> dict[tuple[str, int], int]:
    return {
        (topic, p): entry.offset
        for topic, parts in driver.machine.fetch_offsets("g", None)
        for p, entry in parts
        if entry is not None
    }


async def test_a_commit_is_answered_once_it_is_in_the_log_and_loads_back(tmp_path: Path) -> None:
    clock = Clock()
    topic = OneLogTopic(open_log(tmp_path / "__consumer_offsets-0", clock=clock))
    driver = driver_over(topic, clock)
    assert await driver.ready("g") == ErrorCode.NONE
    assert topic.created == 0  # it exists already
    assert await driver.commit(request(42)) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    records = read_partition(topic.log)
    assert [
        (r.partition, r.entry.offset) for r in records if isinstance(r, OffsetRecord) and r.entry
    ] == [
        (0, 42),
        (1, 42),
    ]
    assert topic.log.epochs.latest_epoch() == 3  # written with the partition's leader epoch
    again = driver_over(topic, clock)
    await again.load()
    assert committed(again) == {("t", 0): 42, ("t", 1): 42}


async def test_a_commit_whose_append_fails_is_answered_not_coordinator(tmp_path: Path) -> None:
    clock = Clock()
    topic = OneLogTopic(open_log(tmp_path / "__consumer_offsets-0", clock=clock))
    driver = driver_over(topic, clock)
    assert await driver.commit(request(1)) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    topic.log.close()  # appends now fail with KAFKA_STORAGE_ERROR, as after a disk failure
    assert await driver.commit(request(2)) == {
        ("t", 0): ErrorCode.NOT_COORDINATOR,
        ("t", 1): ErrorCode.NOT_COORDINATOR,
    }
    assert committed(driver) == {("t", 0): 1, ("t", 1): 1}


async def test_a_group_whose_partition_is_not_led_here_is_not_coordinated(tmp_path: Path) -> None:
    clock = Clock()
    topic = OneLogTopic(open_log(tmp_path / "__consumer_offsets-0", clock=clock), partitions=2)
    driver = GroupDriver(
        topic,
        GroupConfig(),
        num_partitions=2,  # "g" hashes to partition 1, which this node does not lead
        retention_check_interval_ms=600_000,
        clock=clock,
    )
    assert await driver.commit(request(1)) == {
        ("t", 0): ErrorCode.NOT_COORDINATOR,
        ("t", 1): ErrorCode.NOT_COORDINATOR,
    }
    topic.count = 1  # and a partition that does not exist at all
    assert await driver.commit(request(1)) == {
        ("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ("t", 1): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }


class MovingTopic(OneLogTopic):
    """Partition 0 in a real log, led here only while `leading` says so."""

    def __init__(self, partition_log: PartitionLog) -> None:
        super().__init__(partition_log)
        self.leading = True

    def leader(self, partition: int) -> tuple[PartitionLog, int] | None:
        return super().leader(partition) if self.leading else None


def join_request(group: str = "g") -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id="",
        protocol_type="consumer",
        protocols=[("range", b"")],
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        require_known_member_id=False,
    )


async def test_losing_leadership_unloads_the_groups_and_answers_not_coordinator(
    tmp_path: Path,
) -> None:
    clock = Clock()
    topic = MovingTopic(open_log(tmp_path / "__consumer_offsets-0", clock=clock))
    driver = GroupDriver(
        topic,
        GroupConfig(initial_rebalance_delay_ms=60_000),  # the join stays parked
        num_partitions=1,
        retention_check_interval_ms=600_000,
        clock=clock,
    )
    driver.follow()
    assert driver.owned == {0}
    assert await driver.commit(request(5)) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    joined: list[JoinResult] = []

    async def join() -> None:
        joined.append(await driver.join(join_request()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join)
        await wait_all_tasks_blocked()
        assert not joined  # parked in the join phase
        topic.leading = False
        driver.follow()
    assert [j.error for j in joined] == [ErrorCode.NOT_COORDINATOR]
    assert driver.owned == set()
    assert driver.machine.groups == {}
    assert driver.coordinator_error("g") == ErrorCode.NOT_COORDINATOR
    assert await driver.ready("g") == ErrorCode.NOT_COORDINATOR


async def test_gaining_leadership_loads_the_partition_in_the_background(tmp_path: Path) -> None:
    clock = Clock()
    topic = MovingTopic(open_log(tmp_path / "__consumer_offsets-0", clock=clock))
    first = driver_over(topic, clock)
    assert await first.commit(request(7)) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}

    topic.leading = False
    driver = driver_over(topic, clock)
    await driver.load()
    assert driver.coordinator_error("g") == ErrorCode.NOT_COORDINATOR
    async with trio.open_nursery() as nursery:
        topic.leading = True
        driver.follow()
        assert driver.coordinator_error("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        nursery.start_soon(driver.run)
        await wait_for(lambda: driver.coordinator_error("g") == ErrorCode.NONE, "the load")
        assert committed(driver) == {("t", 0): 7, ("t", 1): 7}
        nursery.cancel_scope.cancel()


class HeldReplication:
    """A replicated partition's wait for the ISR, answered by the test."""

    def __init__(self) -> None:
        self.answer: ErrorCode | None = None
        self.started = 0
        self._decided = trio.Event()

    async def __call__(self) -> ErrorCode:
        self.started += 1
        await self._decided.wait()
        assert self.answer is not None
        return self.answer

    def decide(self, answer: ErrorCode) -> None:
        self.answer = answer
        self._decided.set()


@pytest.mark.parametrize(
    ("replicated", "answered"),
    [
        (ErrorCode.NONE, ErrorCode.NONE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
    ],
)
async def test_a_commit_to_a_replicated_partition_is_answered_once_the_isr_holds_it(
    tmp_path: Path, replicated: ErrorCode, answered: ErrorCode
) -> None:
    clock = Clock()
    topic = OneLogTopic(open_log(tmp_path / "__consumer_offsets-0", clock=clock))
    held = topic.replicated = HeldReplication()
    driver = driver_over(topic, clock)
    answers: list[dict[tuple[str, int], ErrorCode]] = []

    async def commit() -> None:
        answers.append(await driver.commit(request(9)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        nursery.start_soon(commit)
        await wait_all_tasks_blocked()
        assert held.started == 1  # in the log, waiting for the ISR
        assert topic.log.log_end_offset > 0
        assert not answers
        assert committed(driver) == {}  # not visible to OffsetFetch before it is committed
        held.decide(replicated)
        await wait_for(lambda: bool(answers), "the commit's answer")
        nursery.cancel_scope.cancel()
    assert answers == [{("t", 0): answered, ("t", 1): answered}]
    assert committed(driver) == ({("t", 0): 9, ("t", 1): 9} if answered == ErrorCode.NONE else {})
