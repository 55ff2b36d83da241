"""Before and after in one run: Strom from two (or more) checkouts, alternating, fresh brokers.

    git archive 581eda7 | tar -x -C /tmp/before           # any earlier commit, unpacked
    python bench/ab.py --tree before=/tmp/before --tree after=. --rounds 5
    python bench/ab.py --tree a=/tmp/a --tree b=. --workload 200000x1024/4p/all --phases produce,consume

A change to a hot path is measured here before it is kept: each round starts every tree's
`strom serve` afresh (`bench/harness.py` StromSpec with `tree`), in an order that rotates from
round to round, warms it up (a small produce and consume: connections, lazy imports,
`__consumer_offsets`), then runs the same phases (`bench/workloads.py`) on a fresh topic. Broker
CPU per message is read from /proc as in every other benchmark. Reported per tree and phase: the
median CPU µs/msg over the rounds (min-max), and per later tree the median of the per-round
ratios to the first tree, which cancels most of the machine's drift between rounds (only the
brokers of one round are compared with each other). A tree without the compiled record walk
(`python setup.py build_ext --inplace` in it) runs the walk as Python.

Workload syntax: COUNTxSIZE/Pp/ACKS[/COMPRESSION], e.g. 1000000x100/1p/1 or 200000x1024/4p/all/lz4.
Phases: produce, consume, latency (paced single records, `--rate` msg/s, linger.ms=0,
`--seconds`; acks from the workload), and `wire`: Strom's own small client
(`bench/wireclient.py`) sends `--wire-requests` Produce requests of one pre-built batch of
`--wire-batch` records (the workload's value size, partition 0), `--wire-inflight` pipelined,
so every tree gets exactly the same bytes in the same request shape (librdkafka's batches
follow its rate, which follows the machine's load). Output: a markdown table; JSON with `--json`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/ab.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import RunningBroker, StromSpec, machine_info, start_broker  # noqa: E402
from bench.wireclient import (  # noqa: E402
    PRODUCE_VERSION,
    WireClient,
    produce_error,
    produce_request,
    record_batch,
)
from bench.workloads import (  # noqa: E402
    PhaseResult,
    Workload,
    consume,
    create_topic,
    latency,
    produce,
    timed_phase,
    topic_name,
)


def parse_workload(text: str) -> Workload:
    parts = text.split("/")
    count, size = (int(x) for x in parts[0].lower().split("x"))
    partitions = int(parts[1].rstrip("p"))
    acks = parts[2].removeprefix("acks=")
    compression = parts[3] if len(parts) > 3 else "none"
    return Workload(count, size, partitions, acks, compression)


def wire_produce(
    broker: RunningBroker, topic: str, w: Workload, records: int, requests: int, inflight: int
) -> PhaseResult:
    """`requests` Produce requests of one `records`-record batch, `inflight` pipelined."""
    batch = record_batch(records, w.size)
    acks = -1 if w.acks == "all" else int(w.acks)
    request = produce_request(topic, 0, batch, acks)

    def body(result: PhaseResult) -> None:
        with WireClient(broker.bootstrap) as client:
            start = time.perf_counter()
            sent = answered = 0
            while answered < requests:
                while sent < requests and sent - answered < inflight:
                    client.send(request, PRODUCE_VERSION)
                    sent += 1
                error = produce_error(client.receive())
                if error:
                    raise RuntimeError(f"produce error {error}")
                answered += 1
            result.seconds = time.perf_counter() - start
        result.messages = requests * records
        result.payload_bytes = result.messages * w.size
        result.extra = {"requests": requests, "records_per_request": records}

    return timed_phase(broker, "wire", body)


def one_broker(
    spec: StromSpec, w: Workload, phases: list[str], rate: float, seconds: float,
    wire: tuple[int, int, int] = (500, 2000, 4),
) -> dict[str, PhaseResult]:  # fmt: skip
    out: dict[str, PhaseResult] = {}
    with start_broker(spec) as broker:
        warm = Workload(200, w.size, 1, w.acks, w.compression)
        warm_topic = topic_name("warm")
        create_topic(broker.bootstrap, warm_topic, 1)
        produce(broker, warm_topic, warm)
        consume(broker, warm_topic, warm)
        topic = topic_name(spec.label)
        create_topic(broker.bootstrap, topic, w.partitions)
        for phase in phases:
            if phase == "produce":
                out[phase] = produce(broker, topic, w)
            elif phase == "consume":
                out[phase] = consume(broker, topic, w)
            elif phase == "wire":
                out[phase] = wire_produce(broker, topic, w, *wire)
            elif phase == "latency":
                lat_topic = topic_name(f"{spec.label}-lat")
                create_topic(broker.bootstrap, lat_topic, 1)
                out[phase] = latency(
                    broker, lat_topic, rate=rate, seconds=seconds, linger_ms=0, acks=w.acks
                )
            else:
                raise SystemExit(f"unknown phase {phase!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tree", action="append", required=True, metavar="LABEL=PATH",
                        help="a checkout to run the broker from; the first is the baseline")  # fmt: skip
    parser.add_argument("--workload", default="1000000x100/1p/1")
    parser.add_argument("--phases", default="produce")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500.0, help="latency phase msg/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="latency phase duration")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="broker config for every tree")  # fmt: skip
    parser.add_argument(
        "--wire-batch", type=int, default=500, help="wire phase: records per request"
    )
    parser.add_argument("--wire-requests", type=int, default=2000, help="wire phase: requests")
    parser.add_argument("--wire-inflight", type=int, default=4, help="wire phase: pipelined")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    trees = [(label, Path(path)) for label, _, path in (t.partition("=") for t in args.tree)]
    overrides = dict(o.split("=", 1) for o in args.override)
    w = parse_workload(args.workload)
    phases = args.phases.split(",")
    results: dict[str, list[dict[str, PhaseResult]]] = {label: [] for label, _ in trees}
    for rnd in range(args.rounds):
        order = trees[rnd % len(trees) :] + trees[: rnd % len(trees)]
        for label, path in order:
            spec = StromSpec(label=label, tree=path, overrides=overrides)
            got = one_broker(spec, w, phases, args.rate, args.seconds,
                             (args.wire_batch, args.wire_requests, args.wire_inflight))  # fmt: skip
            results[label].append(got)
            brief = ", ".join(
                f"{ph} {r.cpu_us_per_msg:.3f} µs/msg {r.msgs_per_s:,.0f} msg/s "
                f"(others {r.other_cpu_s:.1f} s)" if r.ok else f"{ph} n/a ({r.error})"
                for ph, r in got.items()
            )  # fmt: skip
            print(f"round {rnd + 1} {label}: {brief}", flush=True)
    base = trees[0][0]
    print(f"\n{w.key}, {args.rounds} rounds, broker CPU µs/msg: median (min-max); "
          f"ratio = median of per-round ratios to {base}\n")  # fmt: skip
    print("| tree | phase | µs/msg | msg/s | ratio to " + base + " |")
    print("|---|---|--:|--:|--:|")
    for label, _ in trees:
        for ph in phases:
            cpu = [r[ph].cpu_us_per_msg for r in results[label] if r[ph].ok]
            rate = [r[ph].msgs_per_s for r in results[label] if r[ph].ok]
            ratios = [
                r[ph].cpu_us_per_msg / b[ph].cpu_us_per_msg
                for r, b in zip(results[label], results[base], strict=True)
                if r[ph].ok and b[ph].ok and b[ph].cpu_us_per_msg
            ]
            if not cpu:
                print(f"| {label} | {ph} | n/a | n/a | - |")
                continue
            ratio = f"{statistics.median(ratios):.3f}" if label != base and ratios else "-"
            print(f"| {label} | {ph} | {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f}) "
                  f"| {statistics.median(rate):,.0f} | {ratio} |")  # fmt: skip
            if ph == "latency":
                lat = [r[ph].extra for r in results[label] if r[ph].ok]
                print(f"|  | p50/p99 ms | {statistics.median(x['p50_ms'] for x in lat):.2f} / "
                      f"{statistics.median(x['p99_ms'] for x in lat):.2f} | | |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({
            "meta": {**machine_info(), "workload": w.key, "trees": {k: str(v) for k, v in trees}},
            "results": {k: [{ph: r.as_json() for ph, r in rr.items()} for rr in v]
                        for k, v in results.items()},
        }, indent=2) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
