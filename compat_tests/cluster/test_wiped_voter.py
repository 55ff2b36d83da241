"""A voter of a 3-node quorum whose storage was lost does not rejoin unnoticed.

A Raft voter that forgot its quorum state could vote twice in one epoch, and one that lost its
log grants its vote to any candidate, so it can help elect a leader that lacks committed
metadata. Kafka requires an explicit `kafka-storage format` before such a node starts again;
so does Strom: a member of a multi-node quorum refuses to start on an unformatted metadata
directory (even with `cluster.id` set) or on one that lost its Raft state, with one line
saying what to run, and starts once that has been run. The single node keeps formatting
itself (tests/controller).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from strom.broker.testing.cluster import ClusterError, ClusterNode, ClusterProcess
from strom.broker.testing.embedded import child_environment
from strom.broker.testing.pytest_plugin import StartCluster


def _refusal(node: ClusterNode) -> str:
    """Start the node and return the one line it refused with (fails if it started)."""
    node.start()
    with pytest.raises(ClusterError, match="exited with code 1"):
        node.wait_started(30)
    errors = [line for line in node.output if "level=ERROR" in line]
    assert errors, node.tail(20)
    assert "Traceback" not in node.tail(40)
    return errors[-1]


def _format(cluster: ClusterProcess, node: ClusterNode) -> None:
    """What the refusal says to run: `strom format` with the node's configuration."""
    args = [sys.executable, "-m", "strom", "format", "--cluster-id", cluster.cluster_id, "-g"]
    for key, value in node.overrides.items():
        args += ["--override", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, env=child_environment(), timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("wiped", ["whole disk, cluster.id set", "raft state only"])
def test_a_voter_whose_storage_was_lost_refuses_to_start_until_formatted(
    strom_cluster: StartCluster, wiped: str
) -> None:
    cluster = strom_cluster(combined=3)
    node = cluster.node(3)
    node.stop()
    if wiped == "raft state only":  # meta.properties stays: only the metadata log and votes go
        shutil.rmtree(node.data_dir / "metadata" / "__cluster_metadata-0")
    else:  # everything, and the configuration names the cluster id (once a way back in)
        for child in node.data_dir.iterdir():
            shutil.rmtree(child)
        node.overrides["cluster.id"] = cluster.cluster_id
    line = _refusal(node)
    assert "strom format" in line, line
    assert cluster.cluster_id in line, line

    _format(cluster, node)
    node.start()
    node.wait_started(30)
    cluster.wait_for_brokers()
