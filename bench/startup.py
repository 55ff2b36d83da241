"""Start-up of `strom serve`: process start to the first answered Metadata request (issue 6).

    python bench/startup.py            # 15 starts
    python bench/startup.py -n 30
    python bench/startup.py -n 30 --tree before=/tmp/before --tree after=.   # alternating

Each start is a fresh `python -m strom.broker.process.cli serve` on port 0 with an empty data directory,
timed by `bench.harness.start_broker` exactly as `bench/compare.py` times it: from just before
the process is spawned to the first decoded Metadata response that lists a broker. Reported:
median and min-max in milliseconds, of the wall time and of the broker's CPU time by then
(less disturbed by other processes than the wall time), plus the 1-minute load average (the
machine is shared). With `--tree`, each start runs the checkouts named (e.g. `git archive`
unpacked) one after the other, so a before-and-after comparison shares the machine's drift.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/startup.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import StromSpec, sample, start_broker  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="number of starts (default 15)")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH",
                        help="a checkout to start (repeatable; default: this one)")  # fmt: skip
    args = parser.parse_args()
    trees: dict[str, Path | None] = {"strom": None}
    if args.tree:
        trees = {}
        for item in args.tree:
            label, _, path = item.partition("=")
            trees[label] = None if Path(path).resolve() == _ROOT else Path(path)
    wall: dict[str, list[float]] = {label: [] for label in trees}
    cpu: dict[str, list[float]] = {label: [] for label in trees}
    for _ in range(args.n):
        for label, tree in trees.items():
            with start_broker(StromSpec(tree=tree)) as broker:
                wall[label].append(broker.startup_s * 1000)
                cpu[label].append(sample(broker.pid).cpu_s * 1000)
    for label in trees:
        print(
            f"{label}: start-up to first Metadata over {args.n} starts: "
            f"median {statistics.median(wall[label]):.0f} ms, "
            f"min {min(wall[label]):.0f} ms, max {max(wall[label]):.0f} ms; "
            f"broker CPU median {statistics.median(cpu[label]):.0f} ms "
            f"(min {min(cpu[label]):.0f}, max {max(cpu[label]):.0f})"
        )
    print(f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
