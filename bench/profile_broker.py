"""Profile `strom serve` with py-spy while confluent-kafka produces to it, then consumes.

    python bench/profile_broker.py                          # 1,000,000 x 100 B, 1 partition, acks=1
    python bench/profile_broker.py --size 1024 --count 200000 --partitions 4 --acks all
    python bench/profile_broker.py --native                 # C frames too (crc32c, lz4, ...)
    python bench/profile_broker.py --phases latency --linger 5   # paced 5,000 msg/s for 10 s

Starts one Strom (as `bench/harness.py` does), then for each phase attaches
`py-spy record --format raw` to the broker's pid, runs the phase (`bench/workloads.py`), and
stops py-spy with SIGINT. The raw (collapsed) stacks are kept next to a flame graph made from
them, under `bench/results/profiles/` (ignored by git), and a summary is printed: the share of
the busy samples spent in each function itself ("self") and below it ("total"). py-spy leaves
idle threads out by default, so 100 % is the broker's busy time during the phase.
Needs `py-spy` (the bench extra) and permission to ptrace the broker (root, or
`kernel.yama.ptrace_scope=0`).
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/profile_broker.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import RunningBroker, StromSpec, start_broker  # noqa: E402
from bench.workloads import (  # noqa: E402
    PhaseResult,
    Workload,
    consume,
    create_topic,
    latency,
    produce,
    topic_name,
)

OUT_DIR = _ROOT / "bench" / "results" / "profiles"
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _short(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `func (to/file.py)`: one entry per function."""
    match = _FRAME.match(frame)
    if not match:
        return frame
    path = match.group("file")
    for marker in ("/site-packages/", "/lib/python3.11/", str(_ROOT) + "/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match.group('func')} ({path})"


def _ours(name: str) -> bool:
    return any(
        f"({d}/" in name or f"(strom/{d}/" in name
        for d in ("broker", "wire", "coordinator", "storage")
    ) and not any(
        skip in name for skip in ("(broker/cli.py)", "Server._serve ", "Server.handle_stream ")
    )


IDLE_LEAVES = (
    "EpollIOManager.get_events (trio/_core/_io_epoll.py:243)",  # epoll_wait: the loop idles
    "Condition.wait (threading.py",  # the log cleaner and other threads waiting for work
    "WorkerThread._work (trio/_core/_thread_cache.py",  # trio's idle worker threads
)
"""Leaf frames of a thread that is waiting, not working: py-spy's own idle detection does not
work in every environment (with --nonblocking it cannot), so `summarise` drops these."""


def _idle(stack: str) -> bool:
    leaf = stack.rsplit(";", 1)[-1]
    return any(leaf.startswith(idle) for idle in IDLE_LEAVES)


def summarise(raw: Path, top: int) -> str:
    """Self and total shares per function from py-spy's raw collapsed stacks, without the
    samples of waiting threads (IDLE_LEAVES): 100 % is the broker's busy time."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        if _idle(stack):
            continue
        frames = [_short(f) for f in stack.split(";")]
        if frames and frames[0].startswith(("process ", "thread ")):
            frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        samples += count
        if frames:
            own[frames[-1]] += count
        for name in set(frames):
            total[name] += count
    if not samples:
        return "no samples"
    lines = [f"{samples} samples", "", "self %  function"]
    lines += [f"{100 * n / samples:6.1f}  {name}" for name, n in own.most_common(top)]
    lines += ["", "total %  function (inclusive; Strom's own modules, without the entry points)"]
    ours = [(name, n) for name, n in total.most_common() if _ours(name)]
    lines += [f"{100 * n / samples:7.1f}  {name}" for name, n in ours[:top]]
    return "\n".join(lines)


def profiled(
    broker: RunningBroker, label: str, run: Callable[[], PhaseResult], rate: int, native: bool
) -> tuple[PhaseResult, Path]:
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("py-spy not found: pip install -e '.[bench]'")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    raw = OUT_DIR / f"{label}.txt"
    args = [py_spy, "record", "--format", "raw", "--rate", str(rate), "-o", str(raw),
            "--pid", str(broker.pid), "--nonblocking"]  # fmt: skip
    if native:
        args.append("--native")
    spy = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said: list[str] = []
    sampling = threading.Event()

    def read() -> None:
        assert spy.stdout is not None
        for line in spy.stdout:
            said.append(line.rstrip())
            if "Sampling process" in line:
                sampling.set()
        sampling.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not sampling.wait(30) or spy.poll() is not None:
        raise SystemExit("py-spy did not attach: " + " / ".join(said[-5:]))
    try:
        result = run()
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        reader.join(10)
        if spy.stdout is not None:
            spy.stdout.close()
    err = " / ".join(said[-3:])
    if not raw.exists():
        raise SystemExit(f"py-spy wrote nothing: {err}")
    flame = shutil.which("flamegraph.pl")
    if flame:  # optional: an SVG from the same samples
        with (OUT_DIR / f"{label}.svg").open("w") as svg:
            subprocess.run([flame, str(raw)], stdout=svg, check=False)
    return result, raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--compression", default="none")
    parser.add_argument("--linger", type=float, default=5, help="producer linger.ms")
    parser.add_argument("--phases", default="produce,consume")
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--msg-rate", type=float, default=5000, help="latency phase: msg/s")
    parser.add_argument("--seconds", type=float, default=10, help="latency phase: duration")
    parser.add_argument("--native", action="store_true", help="py-spy --native")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the broker from this checkout (default: this one)")  # fmt: skip
    parser.add_argument("--label", default="", help="prefix of the output files")
    args = parser.parse_args(argv)
    w = Workload(args.count, args.size, args.partitions, args.acks, args.compression)
    tag = args.label + w.key.replace("/", "_").replace("=", "") + f"_linger{args.linger:g}"
    with start_broker(StromSpec(tree=args.tree)) as broker:
        # a small produce and consume first, unprofiled: connections, lazy imports, and the
        # coordinator lookup of librdkafka's consumer (which creates __consumer_offsets)
        warm = Workload(100, w.size, 1, w.acks, w.compression)
        warm_topic = topic_name("warm")
        create_topic(broker.bootstrap, warm_topic, 1)
        produce(broker, warm_topic, warm)
        consume(broker, warm_topic, warm)
        topic = topic_name("profile")
        create_topic(broker.bootstrap, topic, w.partitions)
        for phase in args.phases.split(","):
            label = f"{tag}-{phase}{'-native' if args.native else ''}"

            def run(phase: str = phase) -> PhaseResult:
                if phase == "produce":
                    return produce(broker, topic, w, linger_ms=args.linger)
                if phase == "latency":
                    return latency(
                        broker, topic, rate=args.msg_rate, seconds=args.seconds,
                        linger_ms=args.linger, size=w.size, acks=w.acks,
                    )  # fmt: skip
                return consume(broker, topic, w)

            result, raw = profiled(broker, label, run, args.rate, args.native)
            print(f"== {w.key} {phase}: {result.msgs_per_s:,.0f} msg/s, broker "
                  f"{result.cpu_us_per_msg:.2f} µs/msg (under py-spy), error={result.error}")  # fmt: skip
            if result.extra:
                print(f"latency: {result.extra}")
            print(f"raw stacks: {raw}")
            print(summarise(raw, args.top))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
