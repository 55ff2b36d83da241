"""What transactions cost: Strom's 3-node cluster beside Apache Kafka 4.1.1's, one run.

    python bench/transactions.py            # 10,000 x 100 B per size (at least 20 transactions)
    python bench/transactions.py --quick    # 3,000 records, 1 consume round: a smoke run
    python bench/transactions.py --no-kafka # Strom only (no JVM)

Two set-ups, one after the other (never at once: the machine has 2 cores), with the same
client (confluent-kafka, librdkafka) and the same workloads:

- Strom: three combined nodes (`strom.broker.testing.cluster.ClusterProcess`, as
  `bench/replication.py` runs them) with `__transaction_state` replicated as Kafka's defaults
  have it (replication factor 3, min.insync.replicas 2);
- Apache Kafka 4.1.1: three combined KRaft nodes (`bench/replication.py`'s `KafkaCluster`: jars
  from Maven Central, -Xmx512m, serial GC, C1 only), on its defaults.

Per set-up and transaction size (10, 100 and 1,000 records of 100 B), on a fresh topic of 3
partitions, replication factor 3, min.insync.replicas 2: one transactional producer
(`transactional.id`, acks=all, linger.ms=5) writes the records round-robin over the partitions
(so every transaction spans all three, and its commit sends a marker to three leaders), in
back-to-back transactions: begin, produce, flush, commit. Reported: records/s, the brokers' CPU
per record (utime+stime of the three processes, summed, read before and after as
`bench/harness.py` does), and the commit latency (the `commit_transaction()` call alone, after
the flush: EndTxn to the coordinator, which answers once the outcome is written) p50/p99/max
over the transactions (`--records` records per size, and at least 20 transactions, so
20,000 for the size 1,000). One warm-up transaction first, untimed (it creates
`__transaction_state`).

Then the consumer cost: the size-10 topic (the most markers per record, nothing aborted) is
read from the start with `isolation.level` read_uncommitted and read_committed alternately
(small fetches, as `bench/read_committed.py` reads, so the per-fetch cost shows), five rounds
each; records/s and CPU per record over all the rounds of a level.

Absolute numbers on a shared 2-core machine are noisy; the ratios within one run are the
result. `other_cpu_s` in the JSON says how much else ran meanwhile. Output: a table on stdout,
JSON in `bench/results/transactions.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/transactions.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined,unused-ignore]  # noqa: E402

from bench.harness import ClusterBroker, RunningBroker, machine_info  # noqa: E402
from bench.read_committed import SMALL_FETCHES  # noqa: E402
from bench.replication import KafkaCluster  # noqa: E402
from bench.workloads import (  # noqa: E402
    PhaseResult,
    Workload,
    consume,
    payload_pool,
    percentile,
    timed_phase,
    topic_name,
)
from strom.broker.testing.cluster import ClusterProcess  # noqa: E402

RESULTS = _ROOT / "bench" / "results"
SIZES = (10, 100, 1000)
PARTITIONS = 3
VALUE_BYTES = 100
TIMEOUT = 120.0
STROM_TXN_STATE = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
"""Kafka's defaults for `__transaction_state` (Strom's own defaults suit one node)."""


def create(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """PARTITIONS partitions, replication factor 3, min.insync.replicas 2; returns once every
    partition has a leader and three replicas in sync."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                   config={"min.insync.replicas": "2"})  # fmt: skip
    admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic].result(
        timeout
    )
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) == PARTITIONS
            and all(p.leader >= 0 and len(p.isrs) == 3 for p in found.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: not every partition led with 3 in sync after {timeout}s")
        time.sleep(0.05)


def transactional_produce(
    broker: RunningBroker, topic: str, total: int, per_txn: int
) -> PhaseResult:
    """`total` records in transactions of `per_txn`, back to back; commit latencies in extra."""
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer = Producer({
        "bootstrap.servers": broker.bootstrap,
        "transactional.id": f"bench-txn-{uuid.uuid4().hex[:8]}",
        "acks": "all",
        "linger.ms": 5,
        "delivery.report.only.error": True,
        "on_delivery": on_error,
        "message.timeout.ms": 60_000,  # librdkafka: at most transaction.timeout.ms (60 s)
    })  # fmt: skip
    pool = payload_pool(VALUE_BYTES)
    mask = len(pool) - 1
    # untimed: the coordinator is found (its topic created), the id initialised, the topic's
    # leaders known, and one transaction through every partition
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, pool[p], partition=p)
    producer.commit_transaction(TIMEOUT)
    commits: list[float] = []

    def body(result: PhaseResult) -> None:
        send, poll = producer.produce, producer.poll
        start = time.perf_counter()
        i = 0
        for _ in range(total // per_txn):
            producer.begin_transaction()
            end = i + per_txn
            while i < end:
                try:
                    send(topic, pool[i & mask], partition=i % PARTITIONS)
                except BufferError:
                    poll(0.001)
                    continue
                i += 1
            if producer.flush(TIMEOUT):
                raise TimeoutError(f"records unacknowledged after {TIMEOUT}s")
            began = time.perf_counter()
            producer.commit_transaction(TIMEOUT)
            commits.append(time.perf_counter() - began)
        result.seconds = time.perf_counter() - start
        if errors:
            raise RuntimeError(f"delivery failed: {'; '.join(errors)}")
        result.messages, result.payload_bytes = i, i * VALUE_BYTES

    result = timed_phase(broker, f"transactions of {per_txn}", body)
    ordered = sorted(commits)
    if ordered:
        result.extra.update(
            transaction_size=per_txn,
            transactions=len(ordered),
            commit_p50_ms=round(percentile(ordered, 50) * 1000, 2),
            commit_p99_ms=round(percentile(ordered, 99) * 1000, 2),
            commit_max_ms=round(ordered[-1] * 1000, 2),
        )
    return result


def setup(broker: RunningBroker, records: int, min_txns: int, rounds: int) -> dict[str, Any]:
    """Every transaction size, then the consumer comparison on the size-10 topic."""
    out: dict[str, Any] = {"produce": {}, "consume": []}
    topics: dict[int, str] = {}
    for size in SIZES:
        topic = topics[size] = topic_name(f"txn{size}")
        create(broker.bootstrap, topic)
        phase = transactional_produce(broker, topic, max(records, min_txns * size), size)
        out["produce"][size] = phase
        print(f"{broker.label}: transactions of {size}: {describe(phase)}", file=sys.stderr,
              flush=True)  # fmt: skip
    total = max(records, min_txns * SIZES[0])
    w = Workload(total + PARTITIONS, VALUE_BYTES, PARTITIONS, "all")  # + the warm-up's records
    for _ in range(rounds):
        for level in ("read_uncommitted", "read_committed"):
            phase = consume(broker, topics[SIZES[0]], w, isolation=level, extra=SMALL_FETCHES)
            phase.extra["isolation"] = level
            out["consume"].append(phase)
            print(f"{broker.label}: consume {level}: {describe(phase)}", file=sys.stderr,
                  flush=True)  # fmt: skip
    return out


def describe(phase: PhaseResult) -> str:
    if not phase.ok:
        return f"n/a ({phase.error})"
    text = (f"{phase.msgs_per_s:,.0f} records/s, broker CPU {phase.cpu_us_per_msg:.1f} µs/record, "
            f"other load {phase.other_cpu_s:.1f} s")  # fmt: skip
    if "commit_p50_ms" in phase.extra:
        text += (f", commit p50 {phase.extra['commit_p50_ms']} ms p99 "
                 f"{phase.extra['commit_p99_ms']} ms")  # fmt: skip
    return text


def summed(phases: list[PhaseResult], level: str) -> tuple[float, float] | None:
    """Records/s and broker CPU µs per record over every round of one isolation level (the
    sum, not the best round: one round of the size-10 topic is a tenth of a second, so the
    CPU clock's 10 ms ticks would dominate a single reading)."""
    done = [p for p in phases if p.ok and p.extra.get("isolation") == level]
    records = sum(p.messages for p in done)
    if not records:
        return None
    seconds = sum(p.seconds for p in done)
    return records / seconds, sum(p.broker_cpu_s for p in done) * 1e6 / records


def table(results: dict[str, dict[str, Any]]) -> str:
    rows = ["| set-up | transaction size | records/s | broker CPU µs/record | commit p50 / p99 / max (ms) "
            "| transactions |", "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in results.items():
        for size, p in r["produce"].items():
            if not p.ok:
                rows.append(f"| {name} | {size} | n/a ({p.error}) | | | |")
                continue
            e = p.extra
            rows.append(
                f"| {name} | {size:,} | {p.msgs_per_s:,.0f} | {p.cpu_us_per_msg:.1f} | "
                f"{e['commit_p50_ms']:.1f} / {e['commit_p99_ms']:.1f} / {e['commit_max_ms']:.1f} "
                f"| {e['transactions']:,} |"
            )
    rows += ["", "| set-up | read_uncommitted records/s | read_committed records/s | broker CPU "
             "µs/record uncommitted | committed | committed / uncommitted CPU |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in results.items():
        u = summed(r["consume"], "read_uncommitted")
        c = summed(r["consume"], "read_committed")
        if u is None or c is None:
            rows.append(f"| {name} | n/a | n/a | | | |")
            continue
        rows.append(
            f"| {name} | {u[0]:,.0f} | {c[0]:,.0f} | {u[1]:.2f} | {c[1]:.2f} | {c[1] / u[1]:.2f} |"
        )
    return "\n".join(rows)


def as_json(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "produce": {str(size): p.as_json() for size, p in r["produce"].items()},
        "consume": [p.as_json() for p in r["consume"]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--records", type=int, default=10_000, help="records per transaction size")
    parser.add_argument("--rounds", type=int, default=5, help="consume rounds per isolation level")
    parser.add_argument("--no-kafka", action="store_true", help="Strom only (no JVM)")
    args = parser.parse_args(argv)
    total = 3_000 if args.quick else args.records
    min_txns = 3 if args.quick else 20
    rounds = 1 if args.quick else args.rounds
    began = time.perf_counter()
    load_before = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="strom-bench-txn-") as tmp:
        with ClusterProcess(
            Path(tmp) / "cluster", combined=3, overrides=STROM_TXN_STATE
        ) as cluster:
            cluster.wait_for_brokers()
            results["Strom: 3 nodes"] = setup(ClusterBroker(cluster), total, min_txns, rounds)
        if not args.no_kafka:
            kafka = KafkaCluster(Path(tmp) / "kafka")
            try:
                results["Apache Kafka 4.1.1: 3 nodes"] = setup(kafka, total, min_txns, rounds)
            finally:
                kafka.close()
    out = {
        "meta": {**machine_info(), "elapsed_s": round(time.perf_counter() - began, 1),
                 "records_per_size": total, "min_transactions": min_txns, "value_bytes": VALUE_BYTES, "partitions": PARTITIONS,
                 "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "results": {name: as_json(r) for name, r in results.items()},
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / ("transactions.quick.json" if args.quick else "transactions.json")).write_text(
        json.dumps(out, indent=2) + "\n"
    )
    print(f"\n{total:,} x {VALUE_BYTES} B per transaction size (at least {min_txns} "
          f"transactions), {PARTITIONS} partitions, RF=3, "
          f"min.insync.replicas=2; load average {load_before[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after\n")  # fmt: skip
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
