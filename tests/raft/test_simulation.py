"""The Raft core under the deterministic simulator (`tests.raft.simulate`).

`STROM_RAFT_SEEDS` sets how many seeds run (default 3000, a few tens of CPU seconds); the long
mode is `python -m tests.raft.simulate --seeds 1000000`.
"""

from __future__ import annotations

import os
import re

import pytest

from strom.coordinator.raft.core import PlantedBug
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


LIVENESS = "no leader with committed progress"
EXPECTED = {
    PlantedBug.COMMIT_WITHOUT_OWN_EPOCH: r"leads epoch \d+ with .* committed in epoch|drops committed",
    PlantedBug.LEAD_WITHOUT_VOTE: r"lead epoch|two leaders|claims epoch",
}
"""What the first violation must say where one check is the point (Figure 8 of the Raft paper:
an older epoch's entry committed because a majority holds it, before any entry of the leader's
own epoch, is overwritten by a later leader; the leader completeness check sees it first)."""


def _first_violation(bugs: frozenset[PlantedBug]) -> str | None:
    """The first seed of the CI budget, in order, that fails with `bugs` planted."""
    for seed in range(SEEDS):
        try:
            run_seed(seed, bugs=bugs)
        except InvariantViolation as exc:
            return str(exc)
    return None


@pytest.mark.parametrize("bug", list(PlantedBug), ids=lambda bug: bug.value)
def test_every_planted_bug_is_caught_within_the_seed_budget(bug: PlantedBug) -> None:
    """Each rule of Raft the core keeps, broken on purpose (`RaftConfig.planted_bugs`), makes a
    seed of the CI budget fail a safety check (not merely liveness): the simulator sees it."""
    violation = _first_violation(frozenset({bug}))
    assert violation is not None, f"{SEEDS} seeds did not notice the planted bug {bug.value}"
    assert LIVENESS not in violation, f"{bug.value} seen only as lost liveness: {violation}"
    if bug in EXPECTED:
        assert re.search(EXPECTED[bug], violation), violation
