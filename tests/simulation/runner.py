"""`python -m tests.simulation`: run seeds of the whole-cluster simulation, or replay one.

    python -m tests.simulation --seeds 20             # seeds 0..19, CI size, one line each
    python -m tests.simulation --seed 17              # replay one seed: its trace, its verdict
    python -m tests.simulation --seeds 1000 --first 5000 --size nightly
    python -m tests.simulation --plant hw-ignores-followers --seeds 10 --stop-at-first
    python -m tests.simulation --plant isr-trusts-old-incarnation --opening follower-restart-unfetched --seeds 5 --stop-at-first

Exit status 0 when every seed is VALID, 1 otherwise. The process re-runs itself with
`PYTHONHASHSEED` fixed (sets of names must iterate alike for a seed to replay). docs/simulation.md
describes the sizes, the faults and the checks.
"""

from __future__ import annotations

import argparse
import sys
import time

from strom.config.planted import BUGS
from tests.simulation.determinism import require_fixed_hash_seed
from tests.simulation.nemesis import OPENINGS
from tests.simulation.simulate import Result, run_seed

TAIL = 60
"""Trace lines shown for a failing seed when the whole trace was not asked for."""


def _line(result: Result) -> str:
    faults = ", ".join(f"{k} {v}" for k, v in sorted(result.faults.items())) or "none"
    return (
        f"seed {result.seed}: {result.summary}; faults: {faults}; "
        f"{result.virtual_seconds:.0f}s virtual in {result.cpu_seconds:.1f}s CPU; "
        f"trace {result.trace_hash}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__.split("\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--seed", type=int, help="replay this one seed, printing its trace")
    which.add_argument("--seeds", type=int, default=10, help="how many seeds to run (default 10)")
    parser.add_argument("--first", type=int, default=0, help="the first seed of --seeds (default 0)")
    parser.add_argument("--size", choices=("smoke", "ci", "nightly"), default="ci",
                        help="virtual seconds of faults per seed: smoke 10, ci 30, nightly 90")  # fmt: skip
    parser.add_argument("--plant", action="append", default=[], choices=sorted(BUGS),
                        help="put a fixed bug back (strom.config.planted), to see it caught")  # fmt: skip
    parser.add_argument("--opening", choices=OPENINGS,
                        help="open every seed with this scripted sequence (default: as each seed draws)")  # fmt: skip
    parser.add_argument("--stop-at-first", action="store_true",
                        help="stop at the first failing seed, ending it at its first violation "
                             "(with --seed: end that seed there)")  # fmt: skip
    parser.add_argument("-q", "--quiet", action="store_true", help="--seed: the verdict only")
    args = parser.parse_args(argv)
    require_fixed_hash_seed()
    bugs = frozenset(args.plant)
    if args.seed is not None:
        result = run_seed(args.seed, size=args.size, bugs=bugs, echo=not args.quiet,
                          opening=args.opening, end_at_violation=args.stop_at_first)  # fmt: skip
        print(_line(result), flush=True)
        for violation in result.violations:
            print(f"  {violation}")
        sys.exit(0 if result.ok else 1)
    failed: list[int] = []
    began = time.monotonic()
    for seed in range(args.first, args.first + args.seeds):
        result = run_seed(seed, size=args.size, bugs=bugs, opening=args.opening,
                          end_at_violation=args.stop_at_first)  # fmt: skip
        print(_line(result), flush=True)
        if result.ok:
            continue
        failed.append(seed)
        for violation in result.violations[:10]:
            print(f"  {violation}")
        print(f"  last {TAIL} trace lines:")
        for line in result.trace[-TAIL:]:
            print(f"    {line}")
        plant = "".join(f" --plant {b}" for b in sorted(bugs))
        if args.opening:
            plant += f" --opening {args.opening}"
        if args.stop_at_first:
            plant += " --stop-at-first"
        print(f"  replay: python -m tests.simulation --seed {seed} --size {args.size}{plant}", flush=True)
        if args.stop_at_first:
            break
    ran = (failed[-1] - args.first + 1) if args.stop_at_first and failed else args.seeds
    print(
        f"{ran} seeds, {len(failed)} failed{': ' + ' '.join(map(str, failed)) if failed else ''} "
        f"({time.monotonic() - began:.0f}s)",
        flush=True,
    )
    sys.exit(1 if failed else 0)
