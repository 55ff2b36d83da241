"""The transactional test, short: 3 workers run consume-transform-produce transactions over 4
partitions of a 3-node cluster (replication factor 3, min.insync.replicas=2, one
`__transaction_state` partition replicated three times), some aborted on purpose, through a
few faults of the txn mix (kill -9 and SIGSTOP of the transaction coordinator and of
partition leaders), then a heal, a read_committed read of everything, the groups' offsets and
a comparison of every replica's log. Any lost or torn transaction, aborted read, duplicate,
poll skip or nonmonotonic poll, judged G0/G1c cycle or wrong group offset fails it, with the
checker's summary, the seed and the faults as injected. `STROM_JEPSEN_SEED` picks another
schedule; the long mode is `python -m compat_tests.jepsen --workload txn --faults 100`
(docs/transactions.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compat_tests.jepsen.txn_checker import check, summary
from compat_tests.jepsen.txn_workload import TxnOptions, cluster_settings, describe_plan, run
from strom.broker.testing.pytest_plugin import StartCluster

SEED = 4
"""Its 5 faults: a kill -9 and a SIGSTOP of a partition leader, a 15.6 s SIGSTOP of the
transaction coordinator (past the session timeout: it is fenced and its partition moves), a
kill -9 of the coordinator, then a leader and the coordinator killed at once."""


@pytest.mark.timeout(600)
def test_transactions_survive_coordinator_and_leader_faults(
    strom_cluster: StartCluster, tmp_path: Path
) -> None:
    seed = int(os.environ.get("STROM_JEPSEN_SEED", str(SEED)))
    opts = TxnOptions(seed=seed, faults=5, debug_dir=tmp_path)  # a stuck worker shows its log
    cluster = strom_cluster(**cluster_settings())
    result = run(cluster, opts)
    report = check(result.history)
    text = "\n".join([describe_plan(opts, result.plan), *result.log, summary(report)])
    print(f"\n{text}")
    assert report.ok, text  # the fixture adds every node's last log lines to a failure
    assert report.committed > 0, text
    assert report.aborted_on_purpose > 0, text
    assert report.edges.get("wr"), text
    assert report.replicas_compared, text
