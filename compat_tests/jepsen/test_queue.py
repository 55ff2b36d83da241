"""The queue test, short: ~40 s of idempotent acks=all load on a 3-node cluster (replication
factor 3, min.insync.replicas=2) through 4 faults (kill -9 of a partition leader or of the
active controller, SIGSTOP of a node, a node cut off on the controller links), then a heal and a read of everything. Any lost,
duplicated, reordered or inconsistent acknowledged value fails it, with the checker's summary,
the seed and the faults as injected. `STROM_JEPSEN_SEED` picks another schedule; the long mode
is `python -m compat_tests.jepsen --faults 100 --seed N` (docs/replication.md)."""

from __future__ import annotations

import os
from pathlib import Path

from compat_tests.jepsen.checker import check, summary
from compat_tests.jepsen.workload import Options, describe_plan, queue_cluster, run


def test_acknowledged_values_survive_faults(tmp_path: Path) -> None:
    opts = Options(seed=int(os.environ.get("STROM_JEPSEN_SEED", "1")), faults=4)
    with queue_cluster(tmp_path) as (cluster, links):
        result = run(cluster, links, opts)
        report = check(result.history)
        text = "\n".join([describe_plan(opts, result.plan), *result.log, summary(report)])
        print(f"\n{text}")
        # the nodes' last log lines after the verdict: the only trace CI keeps
        assert report.ok, f"{text}\n{cluster.report(60)}\n{summary(report)}"
        assert report.acked > 0, text
