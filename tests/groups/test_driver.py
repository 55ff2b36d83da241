"""`GroupDriver` without a broker: a real partition log behind the `OffsetsTopic` protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.drivers.group_loading import read_partition
from strom.broker.drivers.groups import GroupDriver
from strom.coordinator.groups.api import CommitPartition, CommitRequest, GroupConfig
from strom.coordinator.groups.records import OffsetRecord
from strom.storage import PartitionLog
from strom.wire.errors import ErrorCode
from tests.log.helpers import Clock, open_log

pytestmark = pytest.mark.trio


class OneLogTopic:
    """`__consumer_offsets` whose partition 0 is led here, in a real log; the others are not."""

    def __init__(self, partition_log: PartitionLog, partitions: int = 1) -> None:
        self.log = partition_log
        self.count = partitions
        self.created = 0

    def partitions(self) -> list[int] | None:
        return list(range(self.count))

    def leader(self, partition: int) -> tuple[PartitionLog, int] | None:
        return (self.log, 3) if partition == 0 else None

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
    assert await driver.ready() == ErrorCode.NONE
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
