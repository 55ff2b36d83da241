"""Kafka's own `kafka-metadata-quorum.sh ... describe --status` against a 3-node combined Strom
cluster (the tool's jars from Maven, as compat_tests/kafka_tools runs them), both ways the tool
finds the quorum.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.cluster import ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster


def through_controllers(cluster: ClusterProcess) -> list[str]:
    return ["--bootstrap-controller", cluster.bootstrap_controllers]


def through_brokers(cluster: ClusterProcess) -> list[str]:
    return ["--bootstrap-server", cluster.bootstrap]


@pytest.mark.parametrize(
    "bootstrap",
    [
        # DescribeCluster (KIP-919) to a controller listener, then DescribeQuorum there
        pytest.param(through_controllers, id="bootstrap-controller"),
        # DescribeQuorum to a broker listener, which forwards it to the active controller
        pytest.param(through_brokers, id="bootstrap-server"),
    ],
)
def test_describe_status_shows_the_leader_and_three_voters(
    strom_cluster: StartCluster, bootstrap: Callable[[ClusterProcess], list[str]]
) -> None:
    tools = KafkaTools.for_tests()
    cluster = strom_cluster(combined=3)
    state = wait_for_leader(cluster)
    out = tools.run("kafka-metadata-quorum", *bootstrap(cluster), "describe", "--status")
    fields = dict(line.split(":", 1) for line in out.lines)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    assert fields["ClusterId"] == cluster.cluster_id, out.describe()
    assert int(fields["LeaderId"]) == state.leader_id, out.describe()
    assert int(fields["LeaderEpoch"]) >= state.leader_epoch, out.describe()
    voters = json.loads(fields["CurrentVoters"])
    assert sorted(v["id"] for v in voters) == [1, 2, 3], out.describe()
    endpoints = {v["id"]: v["endpoints"] for v in voters}
    for node in cluster.controllers:
        assert endpoints[node.node_id] == [f"CONTROLLER://{node.controller_address}"], out.describe()
