"""Strom's pytest plugin: `strom_broker` and `strom_cluster` fixtures for any project's tests.

Installing Strom registers this module under the `pytest11` entry point, so a user's test needs
no set-up:

    def test_round_trip(strom_broker):
        producer = Producer({"bootstrap.servers": strom_broker.bootstrap})
        ...

    def test_failover(strom_cluster):
        cluster = strom_cluster(combined=3)
        cluster.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)   # faults on demand
        cluster.kill(1); cluster.restart(1); cluster.move_leader("orders", 0, to=2)
        ...

Both are real `strom serve` processes (`BrokerProcess`, `ClusterProcess`), also usable outside
pytest as context managers. A failed test that used `strom_cluster` gets every node's last log
lines in its report.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from strom.broker.testing.cluster import ClusterProcess
from strom.broker.testing.embedded import BrokerProcess

_CLUSTERS = pytest.StashKey[list[ClusterProcess]]()

StartCluster = Callable[..., ClusterProcess]


@pytest.fixture
def strom_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A `strom serve` child process on a free port with a temporary data directory."""
    with BrokerProcess(tmp_path / "data") as broker:
        yield broker


@pytest.fixture
def strom_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StartCluster]:
    """Start clusters of `strom serve` children: `strom_cluster(combined=3)` or
    `strom_cluster(controllers=3, brokers=2, overrides={...}, partitionable=True)`
    (`ClusterProcess`'s arguments),
    started and ready; every one is stopped and its sockets closed at teardown."""
    clusters = request.node.stash.setdefault(_CLUSTERS, [])

    def start(
        *,
        combined: int = 0,
        controllers: int = 0,
        brokers: int = 0,
        overrides: Mapping[str, str] | None = None,
        node_overrides: Mapping[int, Mapping[str, str]] | None = None,
        partitionable: bool = False,
        features: Mapping[str, int] | None = None,
        power_cuts: bool = False,
        planted: tuple[str, ...] = (),
        client_ssl: ssl.SSLContext | None = None,
        client_sasl: tuple[str, str, str] | None = None,
        format_args: Sequence[str] = (),
    ) -> ClusterProcess:
        cluster = ClusterProcess(
            tmp_path / f"cluster-{len(clusters)}",
            combined=combined,
            controllers=controllers,
            brokers=brokers,
            overrides=overrides,
            node_overrides=node_overrides,
            partitionable=partitionable,
            features=features,
            power_cuts=power_cuts,
            planted=planted,
            client_ssl=client_ssl,
            client_sasl=client_sasl,
            format_args=format_args,
        )
        clusters.append(cluster)
        cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries its clusters' logs: often the only trace CI keeps."""
    report = yield
    none: list[ClusterProcess] = []
    clusters = item.stash.get(_CLUSTERS, none)
    if report.failed:
        for index, cluster in enumerate(clusters):
            report.sections.append((f"strom cluster {index} logs", cluster.report()))
    return report
