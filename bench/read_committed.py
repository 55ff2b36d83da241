"""What read_committed costs against read_uncommitted (issue 17: no more when nothing was aborted).

    python bench/read_committed.py            # storage: 10 rounds; broker: 1,000,000 x 100 B, 3 rounds
    python bench/read_committed.py --quick    # a smoke run
    python bench/read_committed.py --skip-storage --markers 30000   # broker, committed transactions

Two measurements, each alternating the two isolation levels within one run, so the ratio
holds on a shared, noisy machine (the absolute numbers do not):

1. storage: one `PartitionLog` of 64 segments, read from start to end in 16 KiB reads, as a
   consumer's fetches do, with `read()` (read_uncommitted) and with `read(max_offset=LSO,
   aborted=True)` (read_committed: the LSO and the aborted-transactions search), on a log
   with no aborted transaction, then on one with an aborted transaction in its first segment
   (every read from there on must search), then on one of committed transactions of 3 records
   (a marker after every third record); microseconds per read.
2. broker: one `strom serve`; confluent-kafka produces plain records, then consumers with
   isolation.level read_uncommitted and read_committed alternately read them all in small
   fetches (fetch.max.bytes, max.partition.fetch.bytes and message.max.bytes 16 KiB, so the broker answers
   thousands of fetches and its per-fetch cost shows); msgs/s and the broker's CPU seconds
   per phase. With `--markers N`, the topic holds N records written instead by a
   transactional producer in committed transactions of 10 (a marker after every tenth
   record, nothing aborted).

JSON to stdout and `bench/results/read_committed.json`; a table to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/read_committed.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from confluent_kafka import Producer  # noqa: E402

from bench.harness import StromSpec, broker_version, machine_info, start_broker  # noqa: E402
from bench.workloads import (  # noqa: E402
    PhaseResult,
    Workload,
    consume,
    create_topic,
    payload_pool,
    produce,
    topic_name,
)
from strom.storage import LogConfig, PartitionLog  # noqa: E402
from strom.wire.records import Record, build_batch, iter_batches  # noqa: E402

RESULTS_DIR = _ROOT / "bench" / "results"
T0 = 1_700_000_000_000
READ_BYTES = 16 * 1024
SMALL_FETCHES = {
    "fetch.max.bytes": READ_BYTES,
    "max.partition.fetch.bytes": READ_BYTES,
    "message.max.bytes": READ_BYTES,
}


def _log(path: Path, aborted: bool, markers: bool = False) -> PartitionLog:
    """64 segments of 100-byte records in 10-record batches; one aborted transaction first
    (`aborted`), or (`markers`) committed transactions of one 3-record batch each instead."""
    log = PartitionLog.open(path, "t", 0, LogConfig(segment_bytes=256 * 1024), clock=lambda: T0)
    value = b"x" * 100
    sequence = 0
    while markers and len(log.segments) < 64:
        records = [Record(None, value, (), T0 + i) for i in range(3)]
        log.append(build_batch(records, producer_id=9, producer_epoch=0, base_sequence=sequence,
                               transactional=True), 0, T0)  # fmt: skip
        sequence += 3
        log.append_marker(9, 0, 0, True, 0, T0)
    if aborted:
        txn = build_batch([Record(None, value, (), T0)], producer_id=9, producer_epoch=0,
                          base_sequence=0, transactional=True)  # fmt: skip
        log.append(txn, 0, T0)
        log.append_marker(9, 0, 0, False, 0, T0)
    while len(log.segments) < 64:
        records = [Record(None, value, (), T0 + i) for i in range(10)]
        log.append(build_batch(records), 0, T0)
    return log


def _fetch_offsets(log: PartitionLog) -> list[int]:
    """Where a consumer's successive fetches start: each after the last batch the previous
    one returned (found once, untimed, by decoding what the reads return)."""
    offsets, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        offsets.append(offset)
        data = log.read(offset, READ_BYTES, max_offset=log.high_watermark).read_bytes()
        for header, _ in iter_batches(data, allow_partial=False):
            offset = header.next_offset
    return offsets


def _read_all(log: PartitionLog, offsets: list[int], committed: bool) -> None:
    for offset in offsets:
        if committed:
            log.read(offset, READ_BYTES, max_offset=log.last_stable_offset, aborted=True)
        else:
            log.read(offset, READ_BYTES, max_offset=log.high_watermark)


def storage(rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, aborted, markers in (
            ("no aborted transaction", False, False),
            ("one aborted transaction", True, False),
            ("committed transactions of 3 records", False, True),
        ):
            log = _log(Path(tmp) / label.replace(" ", "-"), aborted, markers)
            offsets = _fetch_offsets(log)
            reads = len(offsets)
            times: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
            for _ in range(rounds):
                for level in ("read_uncommitted", "read_committed"):
                    start = time.perf_counter()
                    _read_all(log, offsets, level == "read_committed")
                    times[level].append((time.perf_counter() - start) / reads * 1e6)
            best = {level: min(t) for level, t in times.items()}
            out[label] = {
                "reads_per_pass": reads,
                "us_per_read": {k: round(v, 2) for k, v in best.items()},
                "ratio_committed_to_uncommitted": round(
                    best["read_committed"] / best["read_uncommitted"], 3
                ),
            }
            log.close()
            print(f"storage, {label}: {out[label]}", file=sys.stderr, flush=True)
    return out


def produce_committed(bootstrap: str, topic: str, count: int, per_txn: int = 10) -> PhaseResult:
    """`count` records in committed transactions of `per_txn` (untimed set-up)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "transactional.id": f"bench-rc-{topic}"})  # fmt: skip
    try:
        producer.init_transactions(60)
        pool = payload_pool(100)
        for t in range(count // per_txn):
            producer.begin_transaction()
            for i in range(per_txn):
                producer.produce(topic, pool[(t * per_txn + i) % len(pool)], partition=0)
            producer.commit_transaction(60)
    except Exception as exc:
        return PhaseResult("produce", error=f"{type(exc).__name__}: {exc}")
    return PhaseResult("produce", messages=count)


def broker(count: int, rounds: int, markers: bool = False) -> dict[str, Any]:
    w = Workload(count, 100, 1, "1")
    rows: list[dict[str, Any]] = []
    with start_broker(StromSpec()) as running:
        topic = topic_name("rc")
        create_topic(running.bootstrap, topic, 1)
        if markers:
            produced = produce_committed(running.bootstrap, topic, count)
        else:
            produced = produce(running, topic, w)
        if not produced.ok:
            return {"error": produced.error}
        for _ in range(rounds):
            for level in ("read_uncommitted", "read_committed"):
                phase = consume(running, topic, w, isolation=level, extra=SMALL_FETCHES)
                rows.append({"isolation": level, **phase.as_json()})
                print(
                    f"broker {level}: {phase.msgs_per_s:,.0f} msgs/s, "
                    f"broker CPU {phase.broker_cpu_s:.2f} s, other load {phase.other_cpu_s:.1f} s"
                    + (f" ERROR {phase.error}" if phase.error else ""),
                    file=sys.stderr,
                    flush=True,
                )
        version = broker_version(StromSpec())

    def best(level: str, key: str, pick: Any) -> float:
        values = [r[key] for r in rows if r["isolation"] == level and r.get("error") is None]
        return float(pick(values)) if values else float("nan")

    summary: dict[str, Any] = {
        level: {
            "msgs_per_s_best": best(level, "msgs_per_s", max),
            "broker_cpu_s_best": best(level, "broker_cpu_s", min),
        }
        for level in ("read_uncommitted", "read_committed")
    }
    summary["cpu_ratio_committed_to_uncommitted"] = round(
        summary["read_committed"]["broker_cpu_s_best"]
        / summary["read_uncommitted"]["broker_cpu_s_best"],
        3,
    )
    summary["cpu_ratio_committed_to_uncommitted_summed"] = round(
        sum(r["broker_cpu_s"] for r in rows if r["isolation"] == "read_committed")
        / sum(r["broker_cpu_s"] for r in rows if r["isolation"] == "read_uncommitted"),
        3,
    )
    return {"version": version, "messages": count, "markers": markers, "phases": rows,
            "summary": summary}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-broker", action="store_true")
    parser.add_argument("--skip-storage", action="store_true")
    parser.add_argument("--markers", type=int, default=0, metavar="N",
                        help="broker: N records in committed transactions of 10 instead")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="broker: rounds per level")
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": machine_info()}
    if not args.skip_storage:
        result["storage"] = storage(2 if args.quick else 10)
    if not args.skip_broker:
        count = args.markers or (20_000 if args.quick else 1_000_000)
        result["broker"] = broker(count, 1 if args.quick else args.rounds, bool(args.markers))
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    name = "read_committed.quick.json" if args.quick else "read_committed.json"
    if args.markers:
        name = name.replace(".json", ".markers.json")
    (RESULTS_DIR / name).write_text(text + "\n")


if __name__ == "__main__":
    main()
