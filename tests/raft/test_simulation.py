"""The Raft core under the deterministic simulator (`tests.raft.simulate`).

`STROM_RAFT_SEEDS` sets how many seeds run (default 3000, a few tens of CPU seconds); the long
mode is `python -m tests.raft.simulate --seeds 1000000`.
"""

from __future__ import annotations

import os
import re

import pytest

from strom.coordinator.raft.core import RaftCore
from tests.raft.simulate import InvariantViolation, Scenario, Simulation, run_seed

SEEDS = int(os.environ.get("STROM_RAFT_SEEDS", "3000"))
CHUNK = 250


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_seeds_keep_every_invariant(first: int) -> None:
    failures = []
    for seed in range(first, min(first + CHUNK, SEEDS)):
        try:
            run_seed(seed)
        except InvariantViolation as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(
        [*failures, "replay one with: python -m tests.raft.simulate --seed N -v"]
    )


def test_a_seed_replays_exactly() -> None:
    first, second = run_seed(7), run_seed(7)
    assert first.events == second.events
    assert first.committed == second.committed
    assert first.now == second.now


@pytest.mark.parametrize(("voters", "observers"), [(1, 2), (2, 0), (4, 1)])
def test_other_quorum_sizes_keep_every_invariant(voters: int, observers: int) -> None:
    for seed in range(40):
        Simulation(seed, Scenario(voters=voters, observers=observers)).run()


def test_five_voters_and_an_observer_commit_after_healing() -> None:
    simulation = Simulation(11, Scenario(voters=5, observers=1))
    simulation.run()
    assert simulation.done
    assert len(simulation.committed) > 50


def test_the_checker_catches_a_core_that_ignores_log_freshness(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A voter that grants votes to candidates with stale logs loses committed entries."""
    monkeypatch.setattr(RaftCore, "_log_up_to_date", lambda self, epoch, offset: True)
    caught = []
    for seed in range(400):
        try:
            run_seed(seed)
        except InvariantViolation as exc:
            caught.append(str(exc))
            break
    assert caught, "400 seeds did not notice votes granted to stale candidates"


def test_the_checker_catches_two_leaders_in_one_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prospective that wins its pre-vote and leads without a real vote (no epoch bump)."""

    def lead_at_once(self: RaftCore, now: int) -> None:
        self._become_leader(now)

    monkeypatch.setattr(RaftCore, "_become_candidate", lead_at_once)
    caught = []
    for seed in range(50):
        try:
            run_seed(seed)
        except InvariantViolation as exc:
            caught.append(str(exc))
            break
    assert caught
    assert re.search(r"lead epoch|two leaders|claims epoch", caught[0]), caught[0]
