"""Consumer groups with aiokafka: three members share six partitions, offsets survive a
restart of the broker, and a leaving member's partitions go to the others."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata

from compat_tests.aiokafka import ak
from compat_tests.groups.ckgroup import ChildMember, produce
from compat_tests.helpers import Deadline, topic_name, wait_until
from strom.broker.testing.embedded import BrokerProcess

TIMEOUT = 30.0


def _consumer(bootstrap: str, group: str, topic: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )


async def _topic(bootstrap: str, partitions: int) -> str:
    name = topic_name("ak-grp")
    async with ak.admin(bootstrap) as admin:
        await ak.create_topic(admin, name, partitions)
    return name


async def _until(check: Any, what: str) -> None:
    deadline = Deadline(TIMEOUT)
    while not check():
        assert not deadline.expired, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_three_members_then_one_leaves(strom_broker: BrokerProcess) -> None:
    async def scenario() -> None:
        bootstrap = strom_broker.bootstrap
        topic = await _topic(bootstrap, 6)
        produce(bootstrap, topic, 6, 5)
        consumers = [_consumer(bootstrap, "ak-three", topic) for _ in range(3)]
        seen: set[tuple[int, int]] = set()

        async def drain(c: AIOKafkaConsumer) -> None:
            while True:
                batch = await c.getmany(timeout_ms=100)
                for tp, records in batch.items():
                    seen.update((tp.partition, r.offset) for r in records)

        for c in consumers:
            await c.start()
        tasks = [asyncio.create_task(drain(c)) for c in consumers]
        try:

            def shares() -> list[int]:
                return sorted(len(c.assignment()) for c in consumers)

            await _until(lambda: shares() == [2, 2, 2] and len(seen) == 30, "2 partitions each")
            tasks.pop().cancel()
            await consumers.pop().stop()  # LeaveGroup: the others take over at once
            await _until(lambda: shares() == [3, 3], "3 partitions each")
        finally:
            for task in tasks:
                task.cancel()
            for c in consumers:
                await c.stop()

    ak.run(scenario)


@pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "kill-9"])
def test_committed_offsets_survive_restart(strom_broker: BrokerProcess, clean: bool) -> None:
    topic = asyncio.run(_topic(strom_broker.bootstrap, 2))

    async def commit() -> None:
        consumer = _consumer(strom_broker.bootstrap, "ak-durable", topic)
        await consumer.start()
        try:
            await _until(lambda: len(consumer.assignment()) == 2, "an assignment")
            await consumer.commit(
                {tp: OffsetAndMetadata(4 + tp.partition, "ak") for tp in consumer.assignment()}
            )
        finally:
            await consumer.stop()

    async def check() -> None:
        consumer = _consumer(strom_broker.bootstrap, "ak-durable", topic)
        await consumer.start()
        try:
            await _until(lambda: len(consumer.assignment()) == 2, "an assignment")
            committed = {tp.partition: await consumer.committed(tp) for tp in consumer.assignment()}
            assert committed == {0: 4, 1: 5}
            positions = {tp.partition: await consumer.position(tp) for tp in consumer.assignment()}
            assert positions == {0: 4, 1: 5}
        finally:
            await consumer.stop()

    produce(strom_broker.bootstrap, topic, 2, 10)
    ak.run(commit)
    strom_broker.restart(clean=clean)
    ak.run(check)


def test_killed_member_partitions_move(strom_broker: BrokerProcess) -> None:
    """An aiokafka member killed with SIGKILL: the two others take its partitions within its
    6 s session, and every record is consumed at least once."""
    bootstrap = strom_broker.bootstrap
    topic = asyncio.run(_topic(bootstrap, 6))
    produce(bootstrap, topic, 6, 20)
    child = ChildMember(bootstrap, "ak-failover", topic, client="aiokafka", delay="0.05")

    async def scenario() -> None:
        wait_until(lambda: child.snapshot()[0] or None, timeout=TIMEOUT, what="child assignment")
        consumers = [_consumer(bootstrap, "ak-failover", topic) for _ in range(2)]
        seen: set[tuple[int, int]] = set()

        async def drain(c: AIOKafkaConsumer) -> None:
            while True:
                batch = await c.getmany(timeout_ms=100)
                for tp, records in batch.items():
                    seen.update((tp.partition, r.offset) for r in records)
                if batch:
                    await c.commit()

        for c in consumers:
            await c.start()
        tasks = [asyncio.create_task(drain(c)) for c in consumers]
        try:

            def shares() -> list[int]:
                return sorted(len(c.assignment()) for c in consumers)

            await _until(
                lambda: shares() == [2, 2] and len(child.snapshot()[0]) == 2, "three members"
            )
            child.kill()
            killed = time.monotonic()
            await _until(lambda: shares() == [3, 3], "the dead member's partitions to move")
            assert time.monotonic() - killed < 6 + 6
            everything = {(p, o) for p in range(6) for o in range(20)}
            await _until(lambda: everything <= seen | set(child.snapshot()[1]), "every record")
        finally:
            for task in tasks:
                task.cancel()
            for c in consumers:
                await c.stop()

    try:
        ak.run(scenario)
    finally:
        child.kill()
