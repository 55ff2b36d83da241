"""The whole-cluster simulation (`python -m tests.simulation`) at CI size.

Each test runs the simulator in a child process, as a user replaying a seed would: the child
fixes `PYTHONHASHSEED` (a seed replays only when sets of names iterate alike), and one run's
broker state never leaks into the next test. `STROM_SIM_SEEDS` sets how many seeds the CI
test runs (default 8, about 15-30 CPU seconds; seeds 4 and 5 open with a scripted sequence
and run 75 virtual seconds); the nightly size is
`python -m tests.simulation --seeds 1000 --size nightly` (docs/simulation.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SEEDS = int(os.environ.get("STROM_SIM_SEEDS", "8"))
ROOT = Path(__file__).resolve().parents[2]
VERDICT = re.compile(r"^seed (\d+): (VALID|INVALID|ERROR)\b.*; trace ([0-9a-f]{32})$", re.M)


def _simulate(*args: str, timeout: float = 840) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.run(
        [sys.executable, "-m", "tests.simulation", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _verdicts(output: str) -> dict[int, tuple[str, str]]:
    return {int(seed): (verdict, digest) for seed, verdict, digest in VERDICT.findall(output)}


@pytest.mark.timeout(900)  # a few CPU seconds a seed; a loaded machine stretches it
def test_ci_seeds_keep_every_property() -> None:
    """Three real brokers under faults, seeds 0..SEEDS-1: no acknowledged write lost,
    duplicated or reordered, transactions atomic, replicas identical, live invariants kept."""
    run = _simulate("--seeds", str(SEEDS))
    verdicts = _verdicts(run.stdout)
    assert sorted(verdicts) == list(range(SEEDS)), run.stdout + run.stderr
    assert run.returncode == 0, run.stdout + run.stderr
    assert all(v == "VALID" for v, _ in verdicts.values()), run.stdout


@pytest.mark.timeout(900)  # a few CPU seconds a seed; a loaded machine stretches it
def test_a_seed_replays_exactly() -> None:
    """Two runs of one seed, in two processes, are the same run: the hash over every traced
    event and every byte the network delivered is equal."""
    first, second = _simulate("--seed", "5", "-q"), _simulate("--seed", "5", "-q")
    a, b = _verdicts(first.stdout), _verdicts(second.stdout)
    assert 5 in a, first.stdout + first.stderr
    assert a == b, f"{first.stdout}\n---\n{second.stdout}"
    other = _verdicts(_simulate("--seed", "6", "-q").stdout)
    assert other[6][1] != a[5][1], "two seeds gave one trace: the hash says nothing"


@pytest.mark.timeout(900)  # a few CPU seconds a seed; a loaded machine stretches it
def test_a_planted_bug_is_caught_within_the_ci_budget() -> None:
    """With the high watermark moved by the leader alone (acks=all answered before the ISR has
    the records), a seed of the CI budget finds a safety violation, not only a stuck run (the
    live high-watermark check, then lost records or committed offsets); and the failing seed
    replays to the same verdict and trace."""
    run = _simulate("--plant", "hw-ignores-followers", "--seeds", str(SEEDS), "--stop-at-first")
    assert run.returncode == 1, run.stdout + run.stderr
    failing = [s for s, (v, _) in _verdicts(run.stdout).items() if v != "VALID"]
    assert failing, run.stdout
    kinds = set(re.findall(r"^  ([a-z ]+): ", run.stdout, re.M))
    assert kinds - {"stuck", "last 60 trace lines"}, f"seen only as lost liveness:\n{run.stdout}"
    seed = str(failing[0])
    replay = _simulate("--plant", "hw-ignores-followers", "--seed", seed, "-q", "--stop-at-first")
    assert replay.returncode == 1
    assert _verdicts(replay.stdout) == {failing[0]: _verdicts(run.stdout)[failing[0]]}


OPENING_BUDGET = 6
"""Seeds a planted bug's opening may take to catch it (when this was written the first seed
caught two of them, the third seed the other: docs/simulation.md); the search stops at the
first catch."""


@pytest.mark.timeout(900)  # a few CPU seconds a seed; a loaded machine stretches it
@pytest.mark.parametrize(
    ("bug", "opening", "seen_as"),
    [
        ("restart-keeps-leader-epoch", "sole-leader-restart", "leader epoch"),
        ("isr-trusts-old-incarnation", "follower-restart-unfetched", "high watermark"),
        ("isr-forgets-unanswered-proposal", "unanswered-isr-change", "high watermark"),
    ],
)
def test_an_isr_bug_is_caught_by_its_opening(bug: str, opening: str, seen_as: str) -> None:
    """The ISR and leader-epoch bugs need a sequence of faults a random schedule rarely
    builds; seeds that open with it (`nemesis.OPENINGS`) catch each within a few seeds, as
    a live invariant (one leader per leader epoch; no high watermark above an ISR member's
    log end), not only as a stuck run."""
    run = _simulate("--plant", bug, "--opening", opening, "--seeds", str(OPENING_BUDGET), "--stop-at-first")
    assert run.returncode == 1, run.stdout + run.stderr
    assert [s for s, (v, _) in _verdicts(run.stdout).items() if v != "VALID"], run.stdout
    invariants = re.findall(r"^  invariant: (.*)$", run.stdout, re.M)
    assert any(seen_as in line for line in invariants), run.stdout
