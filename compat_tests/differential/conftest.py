"""One Apache Kafka node and one Strom broker for the whole differential session.

Kafka takes seconds to start, so both brokers live for the session; sequences keep apart by
name prefixes. A failed test's report carries Kafka's last log lines and Strom's output.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass

import pytest
import trio

from compat_tests.apache_kafka import ApacheKafka
from compat_tests.differential.harness import STATS
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import BrokerProcess
from strom.wire.errors import ErrorCode
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

SAME_CONFIG = {
    # Kafka creates a topic a Metadata request names some time after answering; with it on,
    # what a later request sees depends on timing. Both brokers run without it.
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    # test_transactions.py waits for a timed-out transaction's abort: check every second
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


async def _cluster_default(client: KafkaClient, key: str, value: str) -> None:
    """Set a cluster-wide dynamic default (a fresh Kafka 4.1 cluster has min.insync.replicas)."""
    config = IncrementalAlterConfigsRequest.AlterableConfig(
        name=key, config_operation=0, value=value
    )
    request = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name="",
                                                  configs=[config])])  # fmt: skip
    response = await client.request(request, 1, IncrementalAlterConfigsResponse)
    assert response.responses[0].error_code == ErrorCode.NONE, response


async def _prepare(bootstrap: str) -> int:
    """The node id of the broker; waits until its group coordinator answers."""
    client = await KafkaClient.connect(bootstrap)
    try:
        metadata = await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)
        await _cluster_default(client, "min.insync.replicas", "1")
        with trio.fail_after(60):
            while True:
                found = await client.request(
                    FindCoordinatorRequest(key="warm-up", key_type=0), 3, FindCoordinatorResponse
                )
                if found.error_code == ErrorCode.NONE:
                    break
                await trio.sleep(0.1)
        return metadata.brokers[0].node_id
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    kafka = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"), SAME_CONFIG)
    with kafka:
        yield kafka


@pytest.fixture(scope="session")
def strom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("strom") / "data", SAME_CONFIG)
    with broker:
        yield broker


@dataclass(frozen=True)
class Pair:
    """Both brokers, ready for group requests, with the node id each answers as."""

    kafka: ApacheKafka
    strom: BrokerProcess
    kafka_node: int
    strom_node: int


@pytest.fixture(scope="session")
def pair(apache_kafka: ApacheKafka, strom: BrokerProcess) -> Pair:
    return Pair(
        apache_kafka, strom, trio.run(_prepare, apache_kafka.bootstrap),
        trio.run(_prepare, strom.bootstrap),
    )  # fmt: skip


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STATS.sequences:
        for line in STATS.summary().splitlines():
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        pair = funcargs.get("pair")
        kafka = pair.kafka if isinstance(pair, Pair) else funcargs.get("apache_kafka")
        if isinstance(kafka, ApacheKafka):
            report.sections.append(("Apache Kafka log (last lines)", kafka.tail(80)))
        strom = pair.strom if isinstance(pair, Pair) else funcargs.get("strom")
        if isinstance(strom, BrokerProcess):
            report.sections.append(("strom serve output", "\n".join(list(strom.output)[-80:])))
    return report
