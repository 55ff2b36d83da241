"""Metadata propagation in a cluster: CreateTopics of N partitions until every broker serves them.

    python bench/metadata_propagation.py                      # 10,000 partitions, 3 combined nodes
    python bench/metadata_propagation.py --partitions 2000 --rf 3 --runs 3
    python bench/metadata_propagation.py --split              # 3 controllers + 3 brokers

A fresh cluster (`strom.broker.testing.cluster.ClusterProcess`, child `strom serve` processes on
loopback) per run. The topics (`--per-topic` partitions each) are created with one CreateTopics
request per topic, sent to the active controller's broker, back to back. Reported per run:

- `create`: from the first CreateTopics sent to the last response (the controller's commit of
  every record to the Raft quorum);
- `propagated`: from the first CreateTopics sent until EVERY broker's Metadata lists every
  partition with a leader (each broker has applied the records from the replicated metadata log
  and opened the logs of its own replicas);

plus the 1-minute load average (the machine is shared). Brokers are polled with one Metadata
request for the bench's topics every POLL_S.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/metadata_propagation.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from strom.broker.testing.client import KafkaClient  # noqa: E402
from strom.broker.testing.cluster import ClusterProcess  # noqa: E402
from strom.wire.errors import ErrorCode  # noqa: E402
from strom.wire.messages.create_topics import (  # noqa: E402
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse  # noqa: E402

POLL_S = 0.02
TIMEOUT_S = 600.0
Topic = CreateTopicsRequest.CreatableTopic


async def _served(bootstrap: str, names: list[str], per_topic: int) -> bool:
    """Whether this broker lists every partition of `names` with a leader."""
    client = await KafkaClient.connect(bootstrap, "propagation-bench")
    try:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False,
        )
        response = await client.request(request, 12, MetadataResponse)
    finally:
        await client.aclose()
    for topic in response.topics:
        if topic.error_code != ErrorCode.NONE or len(topic.partitions) != per_topic:
            return False
        if any(p.leader_id < 0 for p in topic.partitions):
            return False
    return len(response.topics) == len(names)


async def _one_run(cluster: ClusterProcess, partitions: int, per_topic: int, rf: int) -> tuple[float, float]:
    names = [f"bench-{i}" for i in range(max(1, partitions // per_topic))]
    target = cluster.brokers[0].bootstrap
    start = time.perf_counter()
    client = await KafkaClient.connect(target, "propagation-bench")
    try:
        for name in names:
            request = CreateTopicsRequest(
                topics=[Topic(name=name, num_partitions=per_topic, replication_factor=rf)],
                timeout_ms=120_000,
            )
            response = await client.request(request, 7, CreateTopicsResponse)
            codes = [t.error_code for t in response.topics]
            if codes != [ErrorCode.NONE]:
                raise SystemExit(f"CreateTopics {name} failed: {codes} {response.topics}")
    finally:
        await client.aclose()
    created = time.perf_counter() - start
    pending = {b.bootstrap for b in cluster.brokers}
    with trio.fail_after(TIMEOUT_S):
        while pending:
            for bootstrap in sorted(pending):
                if await _served(bootstrap, names, per_topic):
                    pending.discard(bootstrap)
            if pending:
                await trio.sleep(POLL_S)
    return created, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--per-topic", type=int, default=1000, help="partitions per topic")
    parser.add_argument("--rf", type=int, default=1, help="replication factor (default 1)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--split", action="store_true", help="3 controllers + 3 brokers")
    args = parser.parse_args()
    creates, totals = [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp, (
            ClusterProcess(Path(tmp), controllers=3, brokers=3)
            if args.split
            else ClusterProcess(Path(tmp), combined=3)
        ) as cluster:
            created, total = trio.run(_one_run, cluster, args.partitions, args.per_topic, args.rf)
        creates.append(created)
        totals.append(total)
        print(f"run {run + 1}: create {created:.2f} s, propagated to every broker {total:.2f} s")
    print(
        f"{args.partitions} partitions (rf {args.rf}, {args.per_topic} per topic) on "
        f"{'3 controllers + 3 brokers' if args.split else '3 combined nodes'}: "
        f"create median {statistics.median(creates):.2f} s, propagated median "
        f"{statistics.median(totals):.2f} s (load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
