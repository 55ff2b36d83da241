"""The checker proves itself: each fixed bug, planted back (`strom.config.planted`), is caught
end to end by a short scripted run of the queue test (`scenarios.py`); and KIP-966's
"last replica standing" loses acknowledged records without eligible leader replicas, as Kafka
documents, and none with them."""

from __future__ import annotations

import pytest

from compat_tests.jepsen.checker import check, summary
from compat_tests.jepsen.scenarios import SCENARIOS, Scenario
from compat_tests.jepsen.workload import Options, cluster_settings, run
from strom.broker.testing.pytest_plugin import StartCluster


def _run(strom_cluster: StartCluster, scenario: Scenario, *, elr: int, planted: bool) -> tuple[dict[str, int], str]:
    plant = (scenario.plant,) if planted and scenario.plant else ()
    cluster = strom_cluster(
        **cluster_settings(elr, split=scenario.split, planted=plant, overrides=scenario.overrides)
    )
    opts = Options(seed=1, faults=0, topic_config=dict(scenario.topic_config),
                   message_timeout_ms=scenario.message_timeout_ms)  # fmt: skip
    result = run(cluster, opts, nemesis=scenario.nemesis)
    report = check(result.history)
    text = "\n".join([f"scenario {scenario.name}, planted {plant or 'nothing'}, ELR {elr}",
                      *result.log, summary(report)])  # fmt: skip
    print(f"\n{text}")
    return report.violations, text


@pytest.mark.timeout(900)  # a scenario runs 1-2 minutes of load; six nodes start and stop
@pytest.mark.parametrize(
    "name", ["unanswered-expansion", "restarted-follower", "restart-same-epoch"]
)
def test_a_planted_bug_is_caught(strom_cluster: StartCluster, name: str) -> None:
    scenario = SCENARIOS[name]
    elr = 0 if name == "restart-same-epoch" else 1  # with ELR every restart leaves the ISR
    violations, text = _run(strom_cluster, scenario, elr=elr, planted=True)
    assert violations.get(scenario.caught_as), text


@pytest.mark.timeout(900)
@pytest.mark.parametrize("elr", [0, 1])
def test_the_last_replica_standing(strom_cluster: StartCluster, elr: int) -> None:
    violations, text = _run(strom_cluster, SCENARIOS["last-replica-standing"], elr=elr, planted=False)
    if elr:
        assert not violations, text
    else:
        assert violations.get("lost"), text
