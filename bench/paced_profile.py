"""Where a replicated record's CPU goes: paced single-record acks=all on a 3-node cluster,
with each node's CPU, its requests per record, and (optionally) a CPU-time profile of each.

    python bench/paced_profile.py                       # 500 msg/s for 10 s, counts and CPU
    python bench/paced_profile.py --rate 200 --seconds 20 --profile bench/results/profiles/paced

The cluster is the test cluster (`ClusterProcess`, combined nodes, RF=3,
min.insync.replicas=2, every node serving `metrics.listener`). One paced phase
(`bench/workloads.py` latency: acks=all, linger.ms=0, so every record is its own Produce and
its own replication round); before and after it, each node's CPU from /proc (user and system
apart) and its `kafka_network_requestmetrics_requests_total` by API, so the output says how
many requests of each kind a node answered per record. `--profile DIR` starts the nodes with
`bench/cpu_sampler` (a CPU-time sampler: only time on a CPU is sampled, never time waiting
for one) and prints, per node, the CPU µs per record spent under each Strom function
(inclusive) and by the module of the innermost frame. Start-up is left out of the profile.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/paced_profile.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import ClusterBroker  # noqa: E402
from bench.replication import create, leader_of  # noqa: E402
from bench.workloads import latency, topic_name  # noqa: E402
from strom.broker.testing.cluster import ClusterProcess  # noqa: E402

SAMPLER = Path(__file__).resolve().parent / "cpu_sampler"
REQUESTS = re.compile(r"kafka_network_requestmetrics_requests_total\{([^}]*)\} ([0-9.e+]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def requests_by_api(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = collections.defaultdict(float)
    for labels, value in REQUESTS.findall(text):
        found = re.search(r'request="([^"]+)"', labels)
        if found:
            out[found.group(1)] += float(value)
    return out


def cpu_ticks(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime (clock ticks)


def summary(path: Path, us_total: float, top: int) -> str:
    """Inclusive µs per record under each Strom function, and by innermost module."""
    inclusive: collections.Counter[str] = collections.Counter()
    modules: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or "importlib" in stack:  # start-up
            continue
        n = int(count)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        for frame in dict.fromkeys(frames):
            if "strom/" in frame:
                inclusive[frame] += n
        leaf = frames[-1]
        module = next((m for m in ("strom/broker/", "strom/wire/", "strom/storage/",
                                   "strom/coordinator/", "trio/", "outcome/", "uuid")
                       if m in leaf), "other")  # fmt: skip
        modules[module] += n
    if not total:
        return "  (no samples)"
    lines = [f"  {total} samples; by innermost module: " + ", ".join(
        f"{m} {c * 100 / total:.0f} %" for m, c in modules.most_common())]  # fmt: skip
    for frame, n in inclusive.most_common(top):
        label = re.sub(r"\(.*?/strom/", "(", frame)  # the function, and its file in strom/
        lines.append(f"  {n / total * us_total:7.0f} µs  {label}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=500.0, help="records per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the paced phase")
    parser.add_argument("--profile", type=Path, default=None, help="CPU-profile into DIR")
    parser.add_argument("--top", type=int, default=40, help="functions listed per node")
    args = parser.parse_args(argv)
    ports = {i: free_port() for i in (1, 2, 3)}
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        os.environ["STROM_CPU_PROFILE"] = str(args.profile.resolve())
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(SAMPLER), os.environ.get("PYTHONPATH")])
        )
    metrics = {i: {"metrics.listener": f"http://127.0.0.1:{p}"} for i, p in ports.items()}
    with (
        tempfile.TemporaryDirectory(prefix="strom-paced-") as tmp,
        ClusterProcess(Path(tmp) / "cluster", combined=3, node_overrides=metrics) as cluster,
    ):
        cluster.wait_for_brokers()
        broker = ClusterBroker(cluster)
        topic = topic_name("paced")
        create(cluster.bootstrap, topic, 3)
        leader, _ = leader_of(cluster.bootstrap, topic)
        time.sleep(2)  # the followers' sessions settle
        before = {n.node_id: (cpu_ticks(n.pid), requests_by_api(ports[n.node_id]))
                  for n in cluster.nodes}  # fmt: skip
        result = latency(broker, topic, rate=args.rate, seconds=args.seconds, linger_ms=0)
        if not result.ok:
            print(f"the paced phase failed: {result.error}")
            return 1
        records = result.messages + 20  # and the phase's warm-up records
        tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
        print(f"{result.messages} records at {args.rate:g}/s: p50 {result.extra['p50_ms']} ms, "
              f"p99 {result.extra['p99_ms']} ms; other processes' CPU "
              f"{result.other_cpu_s:.1f} s in {result.seconds:.1f} s")  # fmt: skip
        total = 0.0
        for node in cluster.nodes:
            (u0, s0), r0 = before[node.node_id]
            (u1, s1), r1 = cpu_ticks(node.pid), requests_by_api(ports[node.node_id])
            user, system = (u1 - u0) * tick_us / records, (s1 - s0) * tick_us / records
            total += user + system
            per = {api: round((r1[api] - r0.get(api, 0)) / records, 3)
                   for api in r1 if r1[api] > r0.get(api, 0)}  # fmt: skip
            role = "leader" if node.node_id == leader else "follower"
            print(f"node {node.node_id} ({role}): {user + system:.0f} µs/record (user "
                  f"{user:.0f}, system {system:.0f}); requests answered per record: {per}")  # fmt: skip
            if args.profile is not None:
                path = args.profile / f"{node.pid}.txt"
                if path.exists():
                    print(summary(path, user + system, args.top))
        print(f"cluster: {total:.0f} µs/record, {total * args.rate / 1e4:.1f} % of a core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
