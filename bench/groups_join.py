"""How long a group of 3 takes to form with group.initial.rebalance.delay.ms=0 (issue 4).

    python bench/groups_join.py            # 20 rounds of each measurement
    python bench/groups_join.py --quick    # 3 rounds

Starts one `strom serve` child process (group.initial.rebalance.delay.ms=0) and a 6-partition
topic, then measures, per round and with a fresh group id each time:

* protocol: three raw protocol clients (one connection each, JoinGroup v9 with the KIP-394
  round trip, SyncGroup v5, Heartbeat v4 every 100 ms) start joining at the same instant;
  the time until all three hold a 2-partition assignment of one generation. A member whose
  SyncGroup or Heartbeat says REBALANCE_IN_PROGRESS rejoins at once, as real clients do.
* librdkafka: three confluent-kafka consumers subscribe at once; the time until each owns 2
  partitions, with heartbeat.interval.ms=100 and with the default 3000 ms.

The JSON goes to stdout and `bench/results/groups_join[.quick].json`; a table to stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/groups_join.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from strom.broker.testing.client import KafkaClient  # noqa: E402
from strom.broker.testing.embedded import BrokerProcess  # noqa: E402
from strom.wire.errors import ErrorCode  # noqa: E402
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse  # noqa: E402
from strom.wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse  # noqa: E402
from strom.wire.messages.join_group import JoinGroupRequest, JoinGroupResponse  # noqa: E402
from strom.wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse  # noqa: E402

PARTITIONS = 6
MEMBERS = 3


class RawMember:
    """A minimal consumer-group client: join, sync, heartbeat, rejoin on rebalance."""

    def __init__(self, client: KafkaClient, group: str) -> None:
        self.client, self.group = client, group
        self.member_id, self.generation, self.assignment = "", -1, b""

    async def join_and_sync(self) -> None:
        while True:
            request = JoinGroupRequest(
                group_id=self.group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                member_id=self.member_id, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
            )  # fmt: skip
            joined = await self.client.request(request, 9, JoinGroupResponse)
            self.member_id = joined.member_id
            if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                continue
            assert joined.error_code == 0, joined.error_code
            assignments = []
            if joined.members:  # the leader: range over the members it was given
                ids = sorted(m.member_id for m in joined.members)
                per = PARTITIONS // len(ids)
                assignments = [
                    SyncGroupRequest.SyncGroupRequestAssignment(
                        m, bytes(range(i * per, i * per + per))
                    )
                    for i, m in enumerate(ids)
                ]
            sync = SyncGroupRequest(
                group_id=self.group, generation_id=joined.generation_id, member_id=self.member_id,
                protocol_type="consumer", protocol_name="range", assignments=assignments,
            )  # fmt: skip
            synced = await self.client.request(sync, 5, SyncGroupResponse)
            if synced.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            assert synced.error_code == 0, synced.error_code
            self.generation, self.assignment = joined.generation_id, bytes(synced.assignment)
            return

    async def heartbeat(self) -> bool:
        """True while the generation holds; False when a rebalance began (rejoined since)."""
        request = HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id
        )
        response = await self.client.request(request, 4, HeartbeatResponse)
        if response.error_code == 0:
            return True
        await self.join_and_sync()
        return False


async def protocol_round(bootstrap: str, group: str) -> float:
    clients = [await KafkaClient.connect(bootstrap) for _ in range(MEMBERS)]
    members = [RawMember(c, group) for c in clients]
    start = time.perf_counter()
    done = trio.Event()
    elapsed = 0.0

    def formed() -> bool:
        gens = {m.generation for m in members}
        return len(gens) == 1 and -1 not in gens and all(len(m.assignment) == 2 for m in members)

    async def run(member: RawMember) -> None:
        nonlocal elapsed
        await member.join_and_sync()
        while not done.is_set():
            if formed():
                elapsed = elapsed or time.perf_counter() - start
                done.set()
                return
            with trio.move_on_after(0.1):
                await done.wait()
            if not done.is_set():
                await member.heartbeat()

    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(run, m)
    for c in clients:
        await c.aclose()
    return elapsed


def librdkafka_round(bootstrap: str, topic: str, group: str, heartbeat_ms: int) -> float:
    from confluent_kafka import Consumer

    consumers = [
        Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
            "heartbeat.interval.ms": heartbeat_ms, "session.timeout.ms": 10_000,
        })
        for _ in range(MEMBERS)
    ]  # fmt: skip
    start = time.perf_counter()
    for c in consumers:
        c.subscribe([topic])
    try:
        while True:
            for c in consumers:
                c.poll(0.005)
            if all(len(c.assignment()) == PARTITIONS // MEMBERS for c in consumers):
                return time.perf_counter() - start
            if time.perf_counter() - start > 60:
                raise RuntimeError("group did not form within 60 s")
    finally:
        for c in consumers:
            c.close()


async def create_topic(bootstrap: str, topic: str) -> None:
    client = await KafkaClient.connect(bootstrap)
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=topic, num_partitions=PARTITIONS, replication_factor=1
            )
        ]
    )
    await client.request(request, 7, CreateTopicsResponse)
    await client.aclose()


def summary(samples: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "rounds": len(ms),
        "median_ms": round(statistics.median(ms), 1),
        "p90_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.9))], 1),
        "max_ms": round(ms[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 3 if args.quick else 20
    results: dict[str, Any] = {"rounds": rounds, "group.initial.rebalance.delay.ms": 0}
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        trio.run(create_topic, broker.bootstrap, "bench-groups")
        results["protocol"] = summary(
            [trio.run(protocol_round, broker.bootstrap, f"raw-{i}") for i in range(rounds)]
        )
        for heartbeat in (100, 3000):
            samples = [
                librdkafka_round(broker.bootstrap, "bench-groups", f"rd-{heartbeat}-{i}", heartbeat)
                for i in range(max(3, rounds // 4))
            ]
            results[f"librdkafka_heartbeat_{heartbeat}ms"] = summary(samples)
    out = (
        _ROOT
        / "bench"
        / "results"
        / ("groups_join.quick.json" if args.quick else "groups_join.json")
    )
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    for name, value in results.items():
        if isinstance(value, dict):
            print(
                f"{name:32} median {value['median_ms']:8.1f} ms  p90 {value['p90_ms']:8.1f} ms  max {value['max_ms']:8.1f} ms",
                file=sys.stderr,
            )


if __name__ == "__main__":
    main()
