"""Start-up of `strom serve`: process start to the first answered Metadata request (issue 6).

    python bench/startup.py            # 15 starts
    python bench/startup.py -n 30

Each start is a fresh `python -m strom.broker.process.cli serve` on port 0 with an empty data directory,
timed by `bench.harness.start_broker` exactly as `bench/compare.py` times it: from just before
the process is spawned to the first decoded Metadata response that lists a broker. Reported:
median and min-max in milliseconds, plus the 1-minute load average (the machine is shared).
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

from bench.harness import StromSpec, start_broker  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="number of starts (default 15)")
    args = parser.parse_args()
    times_ms: list[float] = []
    for _ in range(args.n):
        with start_broker(StromSpec()) as broker:
            times_ms.append(broker.startup_s * 1000)
    print(
        f"start-up to first Metadata over {args.n} starts: "
        f"median {statistics.median(times_ms):.0f} ms, "
        f"min {min(times_ms):.0f} ms, max {max(times_ms):.0f} ms "
        f"(load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
