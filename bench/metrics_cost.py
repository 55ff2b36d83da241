"""What recording metrics costs the produce path: `strom serve` with `metrics.listener` set
against the same without it, alternating in one run.

    python bench/metrics_cost.py               # 5 rounds x 2 brokers x 300,000 x 100 B, acks=1
    python bench/metrics_cost.py --quick       # 2 rounds x 20,000: a smoke run

Each round starts a broker without metrics and one with (`metrics.listener=http://127.0.0.1:0`,
scraped once a second during the phase, as Prometheus would, only faster), in alternating order,
produces the same messages to a fresh one-partition topic (librdkafka, no compression,
linger.ms=0: many small Produce requests, where per-request recording weighs most) and reads
the broker's CPU seconds for the phase from /proc. It reports the broker's CPU microseconds per
message for both, and their ratio per round and overall (the median of the per-round ratios):
a ratio of 1.00 is no measurable cost. Absolute numbers on a shared machine are noisy; the ratio
within a round is what counts. As a bound that noise cannot blur, it also times the recorder
alone on a Produce request of the size the run saw (records per request from the broker's own
counter) and divides by the broker's CPU per Produce request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.harness import RunningBroker, StromSpec, start_broker  # noqa: E402
from bench.workloads import Workload, create_topic, produce, topic_name  # noqa: E402

RESULTS = _ROOT / "bench" / "results" / "metrics_cost.json"


def _metrics_address(broker: RunningBroker) -> str | None:
    for line in broker.output:
        if " metrics=http://" in line:
            return line.split(" metrics=http://", 1)[1].split('"', 1)[0].split()[0]
    return None


def _scrape_every_second(address: str, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as answer:
                answer.read()
        except OSError:
            pass


def one(metrics: bool, count: int) -> dict[str, Any]:
    overrides = {"metrics.listener": "http://127.0.0.1:0"} if metrics else {}
    with start_broker(
        StromSpec(overrides=overrides, label="metrics" if metrics else "plain")
    ) as broker:
        topic = topic_name("mc")
        create_topic(broker.bootstrap, topic, 1)
        stop = threading.Event()
        address = _metrics_address(broker) if metrics else None
        if metrics and address is None:
            raise RuntimeError("the broker did not report its metrics listener")
        scraper = None
        if address is not None:
            scraper = threading.Thread(
                target=_scrape_every_second, args=(address, stop), daemon=True
            )
            scraper.start()
        try:
            workload = Workload(count=count, size=100, partitions=1, acks="1")
            result = produce(broker, topic, workload, linger_ms=0)  # many small requests
        finally:
            stop.set()
            if scraper is not None:
                scraper.join()
        requests = _produce_requests(address) if address is not None else None
    if result.error:
        raise RuntimeError(result.error)
    return {
        "metrics": metrics,
        "messages": result.messages,
        "seconds": result.seconds,
        "broker_cpu_s": result.broker_cpu_s,
        "cpu_us_per_msg": result.broker_cpu_s / result.messages * 1e6,
        "msgs_per_s": result.messages / result.seconds,
        "produce_requests": requests,
    }


def _produce_requests(address: str) -> int:
    """Produce requests the broker answered (its own counter)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return int(sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
        if line.startswith('kafka_network_requestmetrics_requests_total{request="Produce"')
    ))  # fmt: skip


def record_cost_us(records_per_request: int, repeat: int = 20000) -> float:
    """What `record_request` costs for one Produce request of one partition carrying
    `records_per_request` 100-byte records (no broker: the recorder alone), in microseconds."""
    from strom.broker.metrics.recorder import BrokerMetrics
    from strom.wire.messages.produce import ProduceRequest, ProduceResponse
    from strom.wire.records.builder import build_batch
    from strom.wire.records.record import Record

    batch = bytes(build_batch([Record(None, b"x" * 100)] * max(1, records_per_request)))
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData("t", [ProduceRequest.PartitionProduceData(0, batch)])
    ])  # fmt: skip
    response = ProduceResponse(responses=[
        ProduceResponse.TopicProduceResponse("t", [ProduceResponse.PartitionProduceResponse(0, 0)])
    ])  # fmt: skip
    metrics = BrokerMetrics()
    start = time.process_time()  # CPU time: a busy machine does not inflate it
    for _ in range(repeat):
        metrics.record_request(0, 9, request, response, 0.05, 0.4, lambda _: None)
    return (time.process_time() - start) / repeat * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--count", type=int)
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)
    count = args.count or (20_000 if args.quick else 300_000)
    runs: list[dict[str, Any]] = []
    ratios = []
    for index in range(rounds):
        order = (False, True) if index % 2 == 0 else (True, False)
        pair = {m: one(m, count) for m in order}
        ratio = pair[True]["cpu_us_per_msg"] / pair[False]["cpu_us_per_msg"]
        ratios.append(ratio)
        runs += [pair[False], pair[True]]
        print(
            f"round {index + 1}: off {pair[False]['cpu_us_per_msg']:.2f} us/msg "
            f"({pair[False]['msgs_per_s']:,.0f} msg/s), on {pair[True]['cpu_us_per_msg']:.2f} us/msg "
            f"({pair[True]['msgs_per_s']:,.0f} msg/s): ratio {ratio:.3f}",
            file=sys.stderr, flush=True,
        )  # fmt: skip
    on_runs = [r for r in runs if r["metrics"] and r["produce_requests"]]
    per_request = statistics.median(
        r["broker_cpu_s"] / r["produce_requests"] * 1e6 for r in on_runs
    )
    records_per_request = round(
        statistics.median(r["messages"] / r["produce_requests"] for r in on_runs)
    )
    recording = record_cost_us(records_per_request)
    print(
        f"broker CPU per Produce request {per_request:.1f} us ({records_per_request} records each); "
        f"recording one costs {recording:.2f} us: {recording / per_request:.1%} of it",
        file=sys.stderr,
    )  # fmt: skip
    summary = {"rounds": rounds, "count": count, "median_ratio": statistics.median(ratios),
               "cpu_us_per_produce_request": per_request,
               "records_per_request": records_per_request, "record_cost_us": recording,
               "record_share": recording / per_request,
               "ratios": ratios, "runs": runs, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    print(f"median CPU ratio (metrics on / off): {summary['median_ratio']:.3f}", file=sys.stderr)
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
