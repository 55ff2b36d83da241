"""What replication costs: RF=3 acks=all on a 3-node cluster beside RF=1 on one node, one run.

    python bench/replication.py                 # 200,000 x 100 B, then a 10 s latency phase
    python bench/replication.py --quick         # 20,000 messages, 3 s latency: a smoke run
    python bench/replication.py --profile DIR   # also py-spy the leader and a follower

Two set-ups, one after the other, on the same machine with the same client (`bench/workloads.py`):

- `single`: one `strom serve` (`bench/harness.py` StromSpec), a 1-partition topic with
  replication factor 1;
- `rf3`: three combined nodes (`strom.broker.testing.cluster.ClusterProcess`, the test cluster),
  a 1-partition topic with replication factor 3 and min.insync.replicas=2, measured once every
  replica is in the ISR.

Per set-up: idle (no traffic for `--idle` seconds once the topic exists: the CPU of doing
nothing), produce (acks=all, linger.ms=5, as fast as the client goes), consume from the
beginning (from the leader; on a cluster also from a follower: KIP-392, every node in a rack
of its own, `replica.selector.class` the rack-aware one, the consumer's `client.rack` a
follower's rack, each broker process's CPU recorded so the table shows who served it), and
paced produce latency at each of `--rate` (acks=all, linger.ms=0, msg/s, default 500; a
comma-separated list runs one phase per rate: with linger.ms=0 every message is its own
request and its own replication round). Broker CPU is
utime+stime from /proc/<pid>/stat of every broker process of the set-up (the cluster's three
summed: the followers' fetching and appending is part of the cost), read before and after
each phase as `bench/harness.py` does for one broker; the tables give it per message.

`--kafka` adds the peer: three Apache Kafka 4.1.1 combined KRaft nodes (JVMs started as
`compat_tests/apache_kafka.py` starts its one node: jars from Maven Central, -Xmx512m, serial GC,
C1 only), same topic and workloads, CPU summed over the three JVMs.

`--profile DIR` runs `py-spy record` (raw collapsed stacks) on the partition leader and one
follower during a second, unmeasured produce phase of the cluster, then prints each one's top
frames by own time and whether any frame of a record-decoding function (`wire/records`
decode/iteration) appears on the replication path (the follower's append, the leader's
fetch read). Output: markdown on stdout, JSON in `bench/results/replication.json`.
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/replication.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined,unused-ignore]  # noqa: E402

from bench.harness import (  # noqa: E402
    ClusterBroker,
    RunningBroker,
    Sample,
    StromSpec,
    machine_info,
    peak_rss_bytes,
    sample,
    start_broker,
)
from bench.workloads import (  # noqa: E402
    PhaseResult,
    Workload,
    consume,
    idle,
    latency,
    produce,
    topic_name,
)
from strom.broker.testing.cluster import ClusterProcess  # noqa: E402

RESULTS = _ROOT / "bench" / "results"
DECODING = ("decode_records", "records/iterate.py", "records/record.py", "records/walk.py",
            "records/legacy.py")
"""Frames of per-record work (decoding, or the produce-time record walk). On the leader the walk
is the produce validation (Kafka's LogValidator); on a follower any of them would be a bug."""


class KafkaCluster(RunningBroker):
    """Three Apache Kafka combined KRaft nodes (JVMs), as `compat_tests/apache_kafka.py` runs
    one: jars from Maven Central (`compat_tests.maven`), the same small-heap JVM options."""

    def __init__(self, root: Path) -> None:
        from compat_tests import maven
        from compat_tests.apache_kafka import JVM_OPTIONS, free_port, jvm_classpath, write_log4j

        classpath = jvm_classpath("kafka_2.13")
        ports = {i: (free_port(), free_port()) for i in (1, 2, 3)}
        voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in ports.items())
        cluster_id = "-"
        while cluster_id.startswith("-"):  # the storage tool would take it for an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        started = time.perf_counter()
        for i, (port, controller) in ports.items():
            d = root / f"kafka-{i}"
            d.mkdir(parents=True)
            props = {
                "process.roles": "broker,controller", "node.id": str(i),
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "log.dirs": str(d / "data"), "offsets.topic.num.partitions": "1",
                "group.initial.rebalance.delay.ms": "0", **rack_config(i),
            }  # fmt: skip
            config = d / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            java = [maven.require_java(), *JVM_OPTIONS, "-Djava.awt.headless=true",
                    f"-Dlog4j2.configurationFile={write_log4j(d / 'log4j2.properties')}",
                    f"-Dkafka.logs.dir={d}", "-cp", classpath]  # fmt: skip
            fmt = subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                                  "-c", str(config)], capture_output=True, text=True, timeout=120)  # fmt: skip
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka storage format failed: {fmt.stdout}{fmt.stderr}")
            log = d / "server.log"
            with log.open("wb") as out:
                self.procs.append(subprocess.Popen([*java, "kafka.Kafka", str(config)], stdout=out,
                                                   stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
            self.logs.append(log)
        deadline = time.monotonic() + 180
        while not all("Kafka Server started" in log.read_text(errors="replace") for log in self.logs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.close()
                raise RuntimeError("the Apache Kafka cluster did not start")
            time.sleep(0.2)
        bootstrap = ",".join(f"127.0.0.1:{p}" for p, _ in ports.values())
        super().__init__("kafka3", "kafka", bootstrap, self.procs[0].pid,
                         time.perf_counter() - started, started)  # fmt: skip

    def sample(self) -> Sample:
        parts = [sample(p.pid) for p in self.procs]
        return Sample(time.perf_counter(), sum(p.cpu_s for p in parts), sum(p.rss for p in parts))

    def peak_rss(self) -> int:
        return sum(peak_rss_bytes(p.pid) for p in self.procs)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def rack_config(node_id: int) -> dict[str, str]:
    """Every cluster node in a rack of its own, and consumers served by the replica in their
    rack (KIP-392), for the consume-from-a-follower phase."""
    return {"broker.rack": f"rack-{node_id}", "replica.selector.class": SELECTOR}


def node_pids(broker: RunningBroker) -> dict[int, int]:
    """Node id -> pid of every broker process of a cluster set-up."""
    if isinstance(broker, ClusterBroker):
        return {n.node_id: n.pid for n in broker.cluster.nodes}
    if isinstance(broker, KafkaCluster):
        return {i: p.pid for i, p in enumerate(broker.procs, start=1)}
    return {}


def consume_from_follower(broker: RunningBroker, topic: str, w: Workload) -> PhaseResult:
    """The consume phase with `client.rack` set to a follower's rack; `extra` holds each node's
    CPU seconds (the follower should have served it, the leader stayed quiet) and its role."""
    leader, replicas = leader_of(broker.bootstrap, topic)
    follower = next(r for r in replicas if r != leader)
    pids = node_pids(broker)
    before = {n: sample(pid).cpu_s for n, pid in pids.items()}
    result = consume(broker, topic, w, extra={"client.rack": f"rack-{follower}"})
    spent = {n: round(sample(pid).cpu_s - before[n], 2) for n, pid in pids.items()}
    result.extra = {**result.extra, "follower": follower, "leader": leader,
                    "cpu_s_by_node": {str(n): c for n, c in spent.items()}}  # fmt: skip
    return result


def create(bootstrap: str, topic: str, replicas: int, timeout: float = 60.0) -> None:
    """A 1-partition topic; returns once its metadata shows a leader and `replicas` in sync."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replicas > 1 else {}
    new = NewTopic(topic, num_partitions=1, replication_factor=replicas, config=config)
    admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            p = found.partitions[0]
            if p.leader >= 0 and len(p.isrs) == replicas:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: no leader with {replicas} in sync after {timeout}s")
        time.sleep(0.05)


def leader_of(bootstrap: str, topic: str, timeout: float = 30.0) -> tuple[int, list[int]]:
    """The partition's leader and replicas, once the broker asked knows them (another
    broker's metadata may lag the topic's creation by a moment)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if found is not None and found.error is None and 0 in found.partitions:
            p = found.partitions[0]
            if p.leader >= 0:
                return p.leader, list(p.replicas)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: no leader known after {timeout}s")
        time.sleep(0.05)


def phases(
    broker: RunningBroker,
    replicas: int,
    w: Workload,
    rates: list[float],
    seconds: float,
    idle_s: float,
) -> dict[str, PhaseResult]:
    out: dict[str, PhaseResult] = {}
    topic = topic_name(f"rf{replicas}")
    create(broker.bootstrap, topic, replicas)
    time.sleep(2)  # the topic's creation settles (leader elected, followers caught up)
    out["idle"] = idle(broker, idle_s)
    out["produce"] = produce(broker, topic, w)
    out["consume"] = consume(broker, topic, w)
    if replicas > 1:
        out["consume from a follower"] = consume_from_follower(broker, topic, w)
    for rate in rates:
        lat_topic = topic_name(f"rf{replicas}-lat")
        create(broker.bootstrap, lat_topic, replicas)
        out[f"latency {rate:g}/s"] = latency(
            broker, lat_topic, rate=rate, seconds=seconds, linger_ms=0
        )
    return out


def profile(
    cluster: ClusterProcess, w: Workload, outdir: Path, paced_rate: float | None = None
) -> dict[str, Any]:
    """py-spy the leader and a follower during an unmeasured produce (5x the workload), or with
    `paced_rate` during 15 s of single-record acks=all produce at that rate; their top frames."""
    broker = ClusterBroker(cluster)
    topic = topic_name("rf3-profile")
    create(cluster.bootstrap, topic, 3)
    leader, replicas = leader_of(cluster.bootstrap, topic)
    follower = next(r for r in replicas if r != leader)
    outdir.mkdir(parents=True, exist_ok=True)
    spies = {}
    for role, node_id in (("leader", leader), ("follower", follower)):
        path = outdir / f"{role}.txt"
        spies[role] = (path, subprocess.Popen(
            ["py-spy", "record", "--format", "raw", "--rate", "250", "--nonblocking",
             "-p", str(cluster.node(node_id).pid), "-o", str(path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
    if paced_rate is None:
        produce(broker, topic, Workload(w.count * 5, w.size, 1, "all"))  # long enough to sample
    else:
        latency(broker, topic, rate=paced_rate, seconds=15, linger_ms=0)
    report: dict[str, Any] = {}
    for _, spy in spies.values():
        spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled and exits
    for role, (path, spy) in spies.items():
        _, err = spy.communicate(timeout=60)
        if spy.returncode != 0 or not path.exists():
            report[role] = {"error": err.strip()[-300:]}
            continue
        report[role] = top_frames(path)
    return report


def top_frames(path: Path, n: int = 12) -> dict[str, Any]:
    """Own-time top frames of a py-spy raw (collapsed) profile, and any decoding frame seen."""
    own: collections.Counter[str] = collections.Counter()
    decoding: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in frames:
            if any(d in frame for d in DECODING):
                decoding[frame] += count
                break
    return {
        "samples": total,
        "top": [(f, round(c * 100 / total, 1)) for f, c in own.most_common(n)] if total else [],
        "decoding_samples": sum(decoding.values()),
        "decoding_frames": decoding.most_common(5),
    }


def table(results: dict[str, dict[str, PhaseResult]]) -> str:
    """Throughput, consume (from the leader, and from a follower on a cluster) and idle per
    set-up; then one row per set-up and paced rate."""

    def rate(x: PhaseResult) -> str:
        return f"{x.msgs_per_s:,.0f}" if x.ok else f"n/a ({x.error})"

    def cpu(x: PhaseResult) -> str:
        return f"{x.cpu_us_per_msg:.1f}" if x.ok else "n/a"

    def core(x: PhaseResult) -> str:
        return f"{100 * x.broker_cpu_s / x.seconds:.1f}" if x.ok and x.seconds else "n/a"

    rows = ["| set-up | produce msg/s | produce broker CPU µs/msg | consume msg/s | consume broker "
            "CPU µs/msg | from a follower: msg/s, CPU µs/msg, CPU s by node | idle: % of a core "
            "| other processes' CPU s (p / c) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in results.items():
        p, c, quiet = r["produce"], r["consume"], r["idle"]
        f = r.get("consume from a follower")
        follower = "-"
        if f is not None:
            e = f.extra
            by_node = ", ".join(
                f"{n}{' (leader)' if int(n) == e.get('leader') else ''}"
                f"{' (follower read)' if int(n) == e.get('follower') else ''}: {s}"
                for n, s in e.get("cpu_s_by_node", {}).items()
            )
            follower = f"{rate(f)}, {cpu(f)}, {by_node}"
        other = " / ".join(f"{x.other_cpu_s:.1f}" for x in (p, c))
        rows.append(f"| {name} | {rate(p)} | {cpu(p)} | {rate(c)} | {cpu(c)} | {follower} "
                    f"| {core(quiet)} | {other} |")  # fmt: skip
    rows += ["", "| set-up | paced rate | achieved msg/s | p50 / p99 / p999 / max latency (ms) "
             "| broker CPU µs/record | % of a core | other processes' CPU s |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in results.items():
        for phase, lat in r.items():
            if not phase.startswith("latency"):
                continue
            e = lat.extra
            lats = (f"{e['p50_ms']:.2f} / {e['p99_ms']:.2f} / {e['p999_ms']:.2f} / {e['max_ms']:.2f}"
                    if lat.ok else f"n/a ({lat.error})")  # fmt: skip
            achieved = f"{e['rate_achieved']:,.0f}" if lat.ok else "n/a"
            rows.append(f"| {name} | {phase.split()[1]} | {achieved} | {lats} | {cpu(lat)} "
                        f"| {core(lat)} | {lat.other_cpu_s:.1f} |")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--count", type=int, default=200_000, help="messages per produce phase")
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--rate", default="500",
                        help="latency phase msg/s; a comma-separated list runs one per rate")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=None,
                        help="latency phase length (default 10, quick 3)")  # fmt: skip
    parser.add_argument("--idle", type=float, default=None,
                        help="idle phase length in seconds (default 20, quick 3)")  # fmt: skip
    parser.add_argument("--profile", type=Path, default=None, help="py-spy output directory")
    parser.add_argument("--profile-paced", action="store_true",
                        help="profile the paced single-record phase (at --rate) instead")  # fmt: skip
    parser.add_argument("--kafka", action="store_true",
                        help="also a 3-node Apache Kafka 4.1.1 cluster (JVMs; jars via Maven)")  # fmt: skip
    args = parser.parse_args(argv)
    count = 20_000 if args.quick else args.count
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    idle_s = args.idle or (3.0 if args.quick else 20.0)
    w = Workload(count, args.size, 1, "all")
    rates = [float(r) for r in str(args.rate).split(",") if r.strip()]
    began = time.perf_counter()
    results: dict[str, dict[str, PhaseResult]] = {}
    profiled: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="strom-bench-repl-") as tmp:
        with start_broker(StromSpec(label="single"), Path(tmp) / "single") as single:
            results["single node, RF=1"] = phases(single, 1, w, rates, seconds, idle_s)
        racks = {i: rack_config(i) for i in (1, 2, 3)}
        with ClusterProcess(Path(tmp) / "cluster", combined=3, node_overrides=racks) as cluster:
            cluster.wait_for_brokers()
            results["3 nodes, RF=3, min.insync.replicas=2"] = phases(
                ClusterBroker(cluster), 3, w, rates, seconds, idle_s
            )
            if args.profile is not None:
                paced = rates[0] if args.profile_paced else None
                profiled = profile(cluster, w, args.profile, paced)
        if args.kafka:
            kafka = KafkaCluster(Path(tmp) / "kafka")
            try:
                results["Apache Kafka 4.1.1: 3 nodes, RF=3, min.insync.replicas=2"] = phases(
                    kafka, 3, w, rates, seconds, idle_s
                )
            finally:
                kafka.close()
    out = {
        "meta": {**machine_info(), "elapsed_s": round(time.perf_counter() - began, 1),
                 "workload": w.key},
        "results": {k: {ph: r.as_json() for ph, r in v.items()} for k, v in results.items()},
        "profile": profiled,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / ("replication.quick.json" if args.quick else "replication.json")).write_text(
        json.dumps(out, indent=2) + "\n"
    )
    rates_text = ", ".join(f"{r:g}" for r in rates)
    print(f"\n{w.key}; latency: acks=all linger.ms=0 at {rates_text} msg/s, {seconds:.0f}s each\n")
    print(table(results))
    for role, rep in profiled.items():
        print(f"\n{role}: {rep.get('samples', 0)} samples, {rep.get('decoding_samples', 0)} in "
              f"record decoding {rep.get('decoding_frames', '')} {rep.get('error', '')}")  # fmt: skip
        for frame, pct in rep.get("top", []):
            print(f"  {pct:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
