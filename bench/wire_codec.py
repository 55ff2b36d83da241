"""Wire codec micro-benchmark: Strom's generated message codecs against kafka-python's.

    python bench/wire_codec.py            # full run, about 41 s on 2 cores
    python bench/wire_codec.py --quick    # smoke run for CI, about 3.5 s
    python bench/wire_codec.py --profile  # also cProfile Strom's encode and decode per case

For each case the same message is built twice, once as Strom objects (`strom.wire.messages`) and
once as kafka-python 3.x objects (`kafka.protocol`, whose codecs are compiled from the same
Kafka JSON schemas). Both are measured at one version: the newest version that both libraries
support. Before anything is timed, each case checks that the two encodings are byte-identical
and that each library decodes the other's bytes back to the same message.

Operations (each is one call through the library's public API, timed in a `perf_counter`
loop; the loop and call overhead is the same for both libraries):

- `enc+dec`: encode the message to bytes, then decode those bytes;
- `encode`:  message -> bytes (Strom `encode(v)`, kafka-python `encode(version=v)`);
- `decode`:  bytes -> message (Strom `Cls.decode(buf, v)`, kafka-python `Cls.decode(buf, version=v)`);
- `encode_into` (Strom only, informational): message -> chunk list, the broker's send path,
  which skips the final `b"".join`.

Every measurement first warms up and calibrates the iteration count (doubling until a loop
takes a quarter of the round target), then runs N rounds with the garbage collector paused
(as `timeit` does). Reported: median ops/s over the rounds, and the min-max range.
Results go to stdout as a table and to `bench/results/wire_codec.json`
(`wire_codec.quick.json` with `--quick`, so a CI smoke run never overwrites real figures).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/wire_codec.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from strom.wire.message import Message  # noqa: E402
from strom.wire.messages.fetch import FetchResponse  # noqa: E402
from strom.wire.messages.metadata import MetadataResponse  # noqa: E402
from strom.wire.messages.produce import ProduceRequest  # noqa: E402

try:
    import kafka
    from kafka.protocol.consumer.fetch import FetchResponse as KFetchResponse
    from kafka.protocol.metadata import MetadataResponse as KMetadataResponse
    from kafka.protocol.producer import ProduceRequest as KProduceRequest
except ImportError as exc:  # pragma: no cover - kafka-python is a test extra
    raise SystemExit(
        f"bench/wire_codec.py needs kafka-python 3.x ({exc}); pip install -e '.[test]'"
    ) from exc

RESULTS_DIR = _ROOT / "bench" / "results"
KIB = 1024
Op = Callable[[], object]


# --- the messages ------------------------------------------------------------------------


def _blob(size: int, seed: int) -> bytes:
    """Deterministic incompressible bytes standing in for a RecordBatch (never parsed)."""
    return random.Random(seed).randbytes(size)


def _topic_id(i: int) -> uuid.UUID:
    return uuid.UUID(int=(0x5354524F4D << 80) | (i + 1))


@dataclass
class Case:
    name: str
    what: str
    version: int
    strom_cls: type[Message]
    strom_msg: Message
    kp_cls: Any
    kp_msg: Any
    wire: bytes = b""
    results: dict[str, dict[str, Stat]] = field(default_factory=dict)


def produce_case(partitions: int, records_size: int, version: int) -> Case:
    blobs = [_blob(records_size, 100 + p) for p in range(partitions)]
    topic = "bench-produce"
    strom = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=p, records=blobs[p])
                    for p in range(partitions)
                ],
            )
        ],
    )
    kp_topic = KProduceRequest.TopicProduceData
    kp = KProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            kp_topic(
                name=topic,
                partition_data=[
                    kp_topic.PartitionProduceData(index=p, records=blobs[p])
                    for p in range(partitions)
                ],
            )
        ],
    )
    size = f"{records_size // KIB} KiB" if records_size >= KIB else f"{records_size} B"
    return Case(
        name=f"Produce req 1t x {partitions}p x {size}",
        what=f"ProduceRequest: 1 topic x {partitions} partition(s), {size} records each",
        version=version,
        strom_cls=ProduceRequest,
        strom_msg=strom,
        kp_cls=KProduceRequest,
        kp_msg=kp,
    )


def fetch_case(partitions: int, records_size: int, version: int) -> Case:
    blobs = [_blob(records_size, 200 + p) for p in range(partitions)]
    tid = _topic_id(0)

    def strom_partition(p: int) -> FetchResponse.PartitionData:
        return FetchResponse.PartitionData(
            partition_index=p,
            error_code=0,
            high_watermark=1_000_000 + p,
            last_stable_offset=1_000_000 + p,
            log_start_offset=0,
            aborted_transactions=[],
            preferred_read_replica=-1,
            records=blobs[p],
        )

    strom = FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=tid, partitions=[strom_partition(p) for p in range(partitions)]
            )
        ],
    )
    kp_topic = KFetchResponse.FetchableTopicResponse

    def kp_partition(p: int) -> Any:
        return kp_topic.PartitionData(
            partition_index=p,
            error_code=0,
            high_watermark=1_000_000 + p,
            last_stable_offset=1_000_000 + p,
            log_start_offset=0,
            aborted_transactions=[],
            preferred_read_replica=-1,
            records=blobs[p],
        )

    kp = KFetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[kp_topic(topic_id=tid, partitions=[kp_partition(p) for p in range(partitions)])],
    )
    size = f"{records_size // KIB} KiB" if records_size >= KIB else f"{records_size} B"
    return Case(
        name=f"Fetch resp 1t x {partitions}p x {size}",
        what=f"FetchResponse: 1 topic (by id) x {partitions} partitions, {size} records each",
        version=version,
        strom_cls=FetchResponse,
        strom_msg=strom,
        kp_cls=KFetchResponse,
        kp_msg=kp,
    )


def metadata_case(topics: int, partitions: int, version: int) -> Case:
    node, host, port = 1, "strom-0.bench.local", 9092
    names = [f"bench-topic-{t:02d}" for t in range(topics)]
    strom = MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port)],
        cluster_id="strom-bench-cluster",
        controller_id=node,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name=names[t],
                topic_id=_topic_id(t),
                is_internal=False,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=node,
                        leader_epoch=3,
                        replica_nodes=[node],
                        isr_nodes=[node],
                        offline_replicas=[],
                    )
                    for p in range(partitions)
                ],
            )
            for t in range(topics)
        ],
        error_code=0,
    )
    kp_topic = KMetadataResponse.MetadataResponseTopic
    kp = KMetadataResponse(
        throttle_time_ms=0,
        brokers=[KMetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port)],
        cluster_id="strom-bench-cluster",
        controller_id=node,
        topics=[
            kp_topic(
                error_code=0,
                name=names[t],
                topic_id=_topic_id(t),
                is_internal=False,
                partitions=[
                    kp_topic.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=node,
                        leader_epoch=3,
                        replica_nodes=[node],
                        isr_nodes=[node],
                        offline_replicas=[],
                    )
                    for p in range(partitions)
                ],
            )
            for t in range(topics)
        ],
        error_code=0,
    )
    return Case(
        name=f"Metadata resp {topics}t x {partitions}p",
        what=(
            f"MetadataResponse: 1 broker, {topics} topics (with ids) x {partitions} partitions,"
            " replicas/isr [1], offline []"
        ),
        version=version,
        strom_cls=MetadataResponse,
        strom_msg=strom,
        kp_cls=KMetadataResponse,
        kp_msg=kp,
    )


def common_version(strom_cls: type[Message], kp_cls: Any) -> int:
    """The newest version both libraries can encode and decode."""
    return min(strom_cls.MAX_VERSION, int(kp_cls.max_version))


def build_cases() -> list[Case]:
    pv = common_version(ProduceRequest, KProduceRequest)
    fv = common_version(FetchResponse, KFetchResponse)
    mv = common_version(MetadataResponse, KMetadataResponse)
    return [
        produce_case(1, 16 * KIB, pv),
        produce_case(4, 16 * KIB, pv),
        fetch_case(4, 64 * KIB, fv),
        fetch_case(100, 1 * KIB, fv),
        metadata_case(10, 10, mv),
    ]


# --- equivalence -------------------------------------------------------------------------


def check_equivalence(case: Case) -> None:
    """Both libraries put the same bytes on the wire and read each other's bytes back."""
    v = case.version
    strom_bytes = case.strom_msg.encode(v)
    kp_bytes = bytes(case.kp_msg.encode(version=v))
    if strom_bytes != kp_bytes:
        at = next(
            (i for i, (a, b) in enumerate(zip(strom_bytes, kp_bytes, strict=False)) if a != b),
            min(len(strom_bytes), len(kp_bytes)),
        )
        raise SystemExit(
            f"{case.name} v{v}: encodings differ (Strom {len(strom_bytes)} B, "
            f"kafka-python {len(kp_bytes)} B, first difference at byte {at})"
        )
    if case.strom_cls.decode(kp_bytes, v) != case.strom_msg:
        raise SystemExit(f"{case.name} v{v}: Strom decodes kafka-python's bytes differently")
    mismatch = _kp_mismatch(case.kp_cls.decode(strom_bytes, version=v), case.kp_msg, "msg")
    if mismatch:
        raise SystemExit(
            f"{case.name} v{v}: kafka-python decodes Strom's bytes differently at {mismatch}"
        )
    case.wire = strom_bytes


def _kp_mismatch(decoded: Any, original: Any, path: str) -> str | None:
    """Where a kafka-python message decoded at a version differs from the one built, or None."""
    if isinstance(decoded, list):
        if not isinstance(original, list) or len(decoded) != len(original):
            return path
        for i, (d, o) in enumerate(zip(decoded, original, strict=True)):
            where = _kp_mismatch(d, o, f"{path}[{i}]")
            if where:
                return where
        return None
    if hasattr(decoded, "to_dict"):  # a DataContainer: compare the fields of its version
        for name in decoded.to_dict(json=False):
            where = _kp_mismatch(getattr(decoded, name), getattr(original, name), f"{path}.{name}")
            if where:
                return where
        return None
    return None if decoded == original else path


# --- timing --------------------------------------------------------------------------------


@dataclass
class Stat:
    median: float
    low: float
    high: float
    iterations: int
    rounds: int

    def as_json(self) -> dict[str, float | int]:
        return {
            "ops_per_s_median": round(self.median, 1),
            "ops_per_s_min": round(self.low, 1),
            "ops_per_s_max": round(self.high, 1),
            "us_per_op_median": round(1e6 / self.median, 3),
            "iterations_per_round": self.iterations,
            "rounds": self.rounds,
        }


def _loop(fn: Op, n: int) -> float:
    it = range(n)
    start = time.perf_counter()
    for _ in it:
        fn()
    return time.perf_counter() - start


def measure(fn: Op, rounds: int, target_s: float) -> Stat:
    """Warm up and calibrate, then time `rounds` rounds of about `target_s` each."""
    n = 1
    while True:  # warm-up doubles as calibration
        elapsed = _loop(fn, n)
        if elapsed >= target_s / 4 or n >= 1 << 24:
            break
        n *= 2
    iterations = max(1, round(n * target_s / max(elapsed, 1e-9)))
    rates: list[float] = []
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            rates.append(iterations / _loop(fn, iterations))
    finally:
        if gc_was_enabled:
            gc.enable()
    return Stat(statistics.median(rates), min(rates), max(rates), iterations, rounds)


def operations(case: Case) -> dict[str, dict[str, Op]]:
    v = case.version
    wire = case.wire
    s_msg, s_cls = case.strom_msg, case.strom_cls
    k_msg, k_cls = case.kp_msg, case.kp_cls

    def s_encode_into() -> object:
        out: list[Any] = []
        s_msg.encode_into(v, out)
        return out

    return {
        "strom": {
            "enc+dec": lambda: s_cls.decode(s_msg.encode(v), v),
            "encode": lambda: s_msg.encode(v),
            "decode": lambda: s_cls.decode(wire, v),
            "encode_into": s_encode_into,
        },
        "kafka-python": {
            "enc+dec": lambda: k_cls.decode(k_msg.encode(version=v), version=v),
            "encode": lambda: k_msg.encode(version=v),
            "decode": lambda: k_cls.decode(wire, version=v),
        },
    }


OPS = ("enc+dec", "encode", "decode", "encode_into")


def run_case(case: Case, rounds: int, target_s: float) -> None:
    for lib, ops in operations(case).items():
        case.results[lib] = {op: measure(fn, rounds, target_s) for op, fn in ops.items()}


# --- profile -----------------------------------------------------------------------------


def _category(filename: str, func: str) -> str:
    if "wire/messages/" in filename:
        return (
            "object construction (__init__)" if func == "__init__" else "generated codec functions"
        )
    if filename.endswith("wire/message.py"):
        return "wire/message.py helpers"
    if filename.endswith("wire/primitives.py"):
        return "wire/primitives.py (varints)"
    if filename.endswith("uuid.py"):
        return "uuid.UUID"
    if "_struct" in func or "Struct' objects" in func:
        return "struct pack/unpack"
    if "'join' of 'bytes'" in func:
        return "bytes.join"
    if "'append' of 'list'" in func:
        return "list.append"
    return "other (builtins, loop)"


def profile_case(case: Case, seconds: float = 0.5, top: int = 8) -> str:
    """cProfile Strom's encode and decode of one case: own time by category, then top functions.

    cProfile charges a fixed cost to every call it sees, so Python-level calls look more
    expensive than they are; read the shares as "where calls go", not as exact time.
    """
    ops = operations(case)["strom"]
    report = io.StringIO()
    for op in ("encode", "decode"):
        fn = ops[op]
        stat = case.results.get("strom", {}).get(op)
        n = max(1, round(seconds * stat.median)) if stat else 200
        prof = cProfile.Profile()
        prof.enable()
        _loop(fn, n)
        prof.disable()
        stats = pstats.Stats(prof, stream=report)
        raw: dict[tuple[str, int, str], tuple[Any, ...]] = getattr(stats, "stats", {})
        shares: dict[str, float] = {}
        for (filename, _line, func), (_cc, _nc, tottime, *_rest) in raw.items():
            key = _category(filename, func)
            shares[key] = shares.get(key, 0.0) + tottime
        total = sum(shares.values()) or 1.0
        report.write(f"\n### {case.name} v{case.version}: Strom {op} x {n}\n")
        for key, value in sorted(shares.items(), key=lambda kv: -kv[1]):
            report.write(f"  {100 * value / total:5.1f}%  {key}\n")
        stats.sort_stats("tottime").print_stats(top)
    return report.getvalue()


# --- output --------------------------------------------------------------------------------


def _rate(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def _cell(stat: Stat | None) -> str:
    if stat is None:
        return "-"
    return f"{_rate(stat.median)} ({_rate(stat.low)}-{_rate(stat.high)})"


def table(cases: list[Case]) -> str:
    head = ("case", "v", "bytes", "op", "Strom ops/s", "kafka-python ops/s", "Strom/kp")
    rows: list[tuple[str, ...]] = []
    for case in cases:
        for op in OPS:
            s = case.results["strom"].get(op)
            k = case.results["kafka-python"].get(op)
            ratio = f"{s.median / k.median:.2f}x" if s and k else "-"
            first = op == OPS[0]
            rows.append(
                (
                    case.name if first else "",
                    str(case.version) if first else "",
                    f"{len(case.wire):,}" if first else "",
                    op,
                    _cell(s),
                    _cell(k),
                    ratio,
                )
            )
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    right = {2, 4, 5, 6}

    def fmt(row: tuple[str, ...]) -> str:
        cells = (
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        return "| " + " | ".join(cells) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([fmt(head), rule, *(fmt(r) for r in rows)])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def meta(args: argparse.Namespace, rounds: int, target_s: float, elapsed: float) -> dict[str, Any]:
    return {
        "benchmark": "wire_codec",
        "quick": args.quick,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "kafka_python": kafka.__version__,
        "rounds": rounds,
        "round_target_s": target_s,
        "gc_during_rounds": "disabled",
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "elapsed_s": round(elapsed, 1),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "max_versions": {
            "Produce": {
                "strom": ProduceRequest.MAX_VERSION,
                "kafka-python": KProduceRequest.max_version,
            },
            "Fetch": {
                "strom": FetchResponse.MAX_VERSION,
                "kafka-python": KFetchResponse.max_version,
            },
            "Metadata": {
                "strom": MetadataResponse.MAX_VERSION,
                "kafka-python": KMetadataResponse.max_version,
            },
        },
    }


def case_json(case: Case) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": case.name,
        "message": case.what,
        "version": case.version,
        "wire_bytes": len(case.wire),
        "equivalence": "byte-identical encodings; each library decodes the other's bytes",
        "results": {
            lib: {op: stat.as_json() for op, stat in stats.items()}
            for lib, stats in case.results.items()
        },
        "strom_over_kafka_python": {},
    }
    for op, s in case.results["strom"].items():
        k = case.results["kafka-python"].get(op)
        if k is not None:
            out["strom_over_kafka_python"][op] = round(s.median / k.median, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="short smoke run (< 5 s), for CI")
    parser.add_argument(
        "--rounds", type=int, help="timed rounds per measurement (default 5, quick 3)"
    )
    parser.add_argument("--target", type=float, help="seconds per round (default 0.2, quick 0.02)")
    parser.add_argument("--json", type=Path, help="where to write the JSON results")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile Strom encode/decode per case"
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    target_s = args.target or (0.02 if args.quick else 0.2)
    json_path = args.json or RESULTS_DIR / (
        "wire_codec.quick.json" if args.quick else "wire_codec.json"
    )

    started = time.perf_counter()
    cases = build_cases()
    for case in cases:
        check_equivalence(case)
    print(
        f"wire codec micro-benchmark: Python {sys.version.split()[0]}, kafka-python "
        f"{kafka.__version__}, {os.cpu_count()} CPUs ({_cpu_model()}); {rounds} rounds x "
        f"~{target_s}s per measurement; median ops/s (min-max)",
        flush=True,
    )
    for case in cases:
        print(
            f"  {case.name} (v{case.version}, {len(case.wire):,} B): encodings identical",
            flush=True,
        )
        run_case(case, rounds, target_s)
    elapsed = time.perf_counter() - started
    print()
    print(table(cases))
    print(f"\n{elapsed:.1f} s")

    json_path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta(args, rounds, target_s, elapsed), "cases": [case_json(c) for c in cases]}
    json_path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {json_path}")

    if args.profile:
        for case in cases:
            print(profile_case(case))
    return 0


if __name__ == "__main__":
    sys.exit(main())
