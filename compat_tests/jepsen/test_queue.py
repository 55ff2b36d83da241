"""The queue test, short: idempotent acks=all load on a 3-node cluster (replication factor 3,
min.insync.replicas=2, eligible leader replicas on) through a few faults of the hard mix,
then a heal, a read of everything and a comparison of every replica's log. Any lost,
duplicated, reordered or inconsistent value, or two replicas that differ below the high
watermark, fails it, with the checker's summary, the seed and the faults as injected.
`STROM_JEPSEN_SEED` picks another schedule; the long mode is `python -m compat_tests.jepsen
--faults 100 --seed N` (docs/replication.md)."""

from __future__ import annotations

import os

from compat_tests.jepsen.checker import check, summary
from compat_tests.jepsen.workload import Options, cluster_settings, describe_plan, run
from strom.broker.testing.pytest_plugin import StartCluster

SEED = 3
"""Its 6 faults: see the test's output (a long isolation, a power cut, a double fault...)."""


def test_acknowledged_values_survive_faults(strom_cluster: StartCluster) -> None:
    opts = Options(seed=int(os.environ.get("STROM_JEPSEN_SEED", str(SEED))), faults=6, mix="hard")
    cluster = strom_cluster(**cluster_settings(elr=1))
    result = run(cluster, opts)
    report = check(result.history)
    text = "\n".join([describe_plan(opts, result.plan), *result.log, summary(report)])
    print(f"\n{text}")
    assert report.ok, text  # the fixture adds every node's last log lines to a failure
    assert report.acked > 0, text
    assert report.replicas_compared, text
