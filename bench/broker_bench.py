"""End-to-end broker benchmark: `strom serve` driven by confluent-kafka (issue 3).

    python bench/broker_bench.py            # 1,000,000 x 100 B and 200,000 x 1 KiB; ~2 min
    python bench/broker_bench.py --quick    # 5,000 x 100 B and 1,000 x 1 KiB: a smoke run

Starts one `strom serve` child process with a temporary data directory, then for every
combination of value size (100 B, 1 KiB), partitions (1, 4) and acks (1, all) creates a fresh
topic, produces the messages (linger.ms=5, no compression) and reads them back with an
assign-only consumer from offset 0. For each phase it reports msgs/s, MB/s (10^6 bytes of
values) and the broker process's CPU seconds (utime+stime from /proc), plus the broker's
start-up time to the first Metadata answer and its resident memory idle and at the end.

The JSON goes to stdout and to `bench/results/broker_bench.json`
(`broker_bench.quick.json` with `--quick`); a readable table goes to stderr.
See `bench/workloads.py` for what exactly each phase times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/broker_bench.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import StromSpec, broker_version, machine_info, start_broker  # noqa: E402
from bench.workloads import (  # noqa: E402
    MB,
    PhaseResult,
    Workload,
    consume,
    create_topic,
    produce,
    topic_name,
    workloads,
)

RESULTS_DIR = _ROOT / "bench" / "results"
FULL_COUNTS = {100: 1_000_000, 1024: 200_000}
QUICK_COUNTS = {100: 5_000, 1024: 1_000}


def run(counts: dict[int, int], overrides: dict[str, str]) -> dict[str, Any]:
    spec = StromSpec(overrides=overrides)
    rows: list[dict[str, Any]] = []
    with start_broker(spec) as broker:
        idle = broker.idle
        for w in workloads(counts, partitions=(1, 4), acks=("1", "all")):
            topic = topic_name("bb")
            create_topic(broker.bootstrap, topic, w.partitions)
            phases = [produce(broker, topic, w), consume(broker, topic, w)]
            rows.append({"workload": _workload_json(w), **{p.phase: p.as_json() for p in phases}})
            print(_row(w, phases), file=sys.stderr, flush=True)
        end = broker.sample()
        done = [r[p] for r in rows for p in ("produce", "consume")]
        others = sum(p["other_cpu_s"] for p in done) / max(1e-9, sum(p["seconds"] for p in done))
        return {
            "other_processes_cores_busy": round(others, 3),
            "broker": broker_version(spec),
            "overrides": overrides,
            "startup_s": round(broker.startup_s, 4),
            "rss_idle_bytes": idle.rss,
            "rss_end_bytes": end.rss,
            "rss_peak_bytes": broker.peak_rss(),
            "broker_cpu_s_total": round(end.cpu_s, 2),
            "results": rows,
        }


def _workload_json(w: Workload) -> dict[str, Any]:
    return {
        "key": w.key, "count": w.count, "size": w.size, "partitions": w.partitions,
        "acks": w.acks, "compression": w.compression, "linger_ms": 5,
    }  # fmt: skip


HEADER = (
    f"{'workload':<28} {'phase':<8} {'msgs/s':>10} {'MB/s':>8} {'seconds':>8} "
    f"{'broker CPU s':>12} {'µs/msg':>7} {'client CPU s':>12}"
)


def _row(w: Workload, phases: list[PhaseResult]) -> str:
    lines = []
    for p in phases:
        name = w.key if p.phase == "produce" else ""
        if not p.ok:
            lines.append(f"{name:<28} {p.phase:<8} n/a: {p.error}")
            continue
        lines.append(
            f"{name:<28} {p.phase:<8} {p.msgs_per_s:>10,.0f} {p.mb_per_s:>8.1f} {p.seconds:>8.2f} "
            f"{p.broker_cpu_s:>12.2f} {p.cpu_us_per_msg:>7.2f} {p.client_cpu_s:>12.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a few thousand messages, for CI")
    parser.add_argument("--json", type=Path, help="where to write the JSON results")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="extra `strom serve --override` (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.override)
    counts = QUICK_COUNTS if args.quick else FULL_COUNTS
    started = time.perf_counter()
    meta = {"benchmark": "broker_bench", "quick": args.quick, **machine_info()}
    print(HEADER, file=sys.stderr, flush=True)
    body = run(counts, overrides)
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(
        f"start-up {body['startup_s'] * 1000:.0f} ms; RSS idle {body['rss_idle_bytes'] / MB:.1f} MB,"
        f" end {body['rss_end_bytes'] / MB:.1f} MB, peak {body['rss_peak_bytes'] / MB:.1f} MB;"
        f" other processes kept {body['other_processes_cores_busy']:.2f} cores busy",
        file=sys.stderr,
    )
    doc = {"meta": meta, **body}
    text = json.dumps(doc, indent=2)
    print(text)
    path = args.json or RESULTS_DIR / (
        "broker_bench.quick.json" if args.quick else "broker_bench.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    failed = [
        f"{r['workload']['key']} {phase}"
        for r in doc["results"]
        for phase in ("produce", "consume")
        if r[phase]["error"]
    ]
    if failed:
        print(f"failed phases: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
