"""The queue test, short: ~35 s of idempotent acks=all load on a 3-node cluster (replication
factor 3, min.insync.replicas=2) through 5 faults, one of each kind (seed 16: SIGSTOP of a
node, a node cut off by a network partition, kill -9 of partition 2's leader, partition 2's
leader cut off, kill -9 of the active controller), then a heal and a read of everything. Any
lost, duplicated, reordered or inconsistent value fails it, with the checker's summary, the
seed and the faults as injected. `STROM_JEPSEN_SEED` picks another schedule; the long mode is
`python -m compat_tests.jepsen --faults 100 --seed N` (docs/replication.md)."""

from __future__ import annotations

import os

from compat_tests.jepsen.checker import check, summary
from compat_tests.jepsen.workload import Options, describe_plan, run
from strom.broker.testing.pytest_plugin import StartCluster


def test_acknowledged_values_survive_faults(strom_cluster: StartCluster) -> None:
    opts = Options(seed=int(os.environ.get("STROM_JEPSEN_SEED", "16")), faults=5)
    cluster = strom_cluster(combined=3, partitionable=True)
    result = run(cluster, opts)
    report = check(result.history)
    text = "\n".join([describe_plan(opts, result.plan), *result.log, summary(report)])
    print(f"\n{text}")
    assert report.ok, text  # the fixture adds every node's last log lines to a failure
    assert report.acked > 0, text
