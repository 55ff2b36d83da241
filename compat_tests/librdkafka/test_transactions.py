"""librdkafka's own transaction tests on a 3-node Strom cluster (see suite.py for the build).

- 0103 `transactions`: misuse of the API, commits and aborts with and without compression,
  consume-transform-produce with `send_offsets_to_transaction` across 4-partition topics,
  fencing (with and without a produce after it), an idempotent producer's fatal error,
  empty transactions (with and without offsets), the high watermark per isolation level, and
  the leader epoch of abort markers; its topics are replicated three ways.
- 0098 `consumer_txn`: read_committed consumption of every interleaving of committed and
  aborted transactions, control records and plain records, written by Kafka's Java producer
  (the suite's `TransactionProducerCli`, on the Java client from Maven Central).
- 0129 `fetch_aborted_msgs`: a read_committed consumer reaching the end of a partition
  whose tail is an aborted transaction larger than a fetch, across small segments.

Each runs as librdkafka runs it (`test-runner -p1`, the broker version given as Kafka 4.1),
all three on one cluster (each test names its own topics and transactional ids); a failure
shows the runner's last lines and the cluster's logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.cluster.test_cluster import wait_for_leader
from compat_tests.librdkafka import suite
from strom.broker.testing.cluster import ClusterProcess

TESTS = ("0098", "0103", "0129")
CLUSTER = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


@pytest.fixture(scope="module")
def runner() -> Path:
    return suite.test_runner(TESTS)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path_factory.mktemp("rdkafka-cluster"), combined=3,
                        overrides=CLUSTER) as started:  # fmt: skip
        wait_for_leader(started)
        yield started


def _passes(
    runner: Path, cluster: ClusterProcess, tmp_path: Path, test: str, multiplier: float = 4
) -> None:
    done = suite.run(
        runner, test, cluster.bootstrap, tmp_path / "rdkafka",
        extra_conf={"test.timeout.multiplier": str(multiplier)},
    )  # fmt: skip
    output = done.stdout + done.stderr
    (tmp_path / "rdkafka" / "output.txt").write_text(output)
    tail = "\n".join(output.splitlines()[-150:])
    assert done.returncode == 0, (
        f"librdkafka test {test} failed (exit {done.returncode}):\n{tail}\n"
        f"--- cluster ---\n{cluster.report(60)}"
    )
    summary = dict(re.findall(r"\|\S*\s*(\d{4}_\w+)\s+\|\s*(\w+)\s*\|", output))
    ran = {name: verdict for name, verdict in summary.items() if name.startswith(test)}
    assert ran, f"no {test} test in the runner's summary:\n{tail}"
    assert set(ran.values()) == {"PASSED"}, f"{ran}\n{tail}"  # a SKIPPED test proves nothing


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first run fetches and builds librdkafka (several minutes)
def test_0103_transactions(runner: Path, cluster: ClusterProcess, tmp_path: Path) -> None:
    _passes(runner, cluster, tmp_path, "0103")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_0098_consumer_txn(runner: Path, cluster: ClusterProcess, tmp_path: Path) -> None:
    # 1, not 4: after each read, 0098 waits for a statistics event in consume() calls of 500 ms
    # times the multiplier, and one such call always runs out (56 of them in the test); its
    # other waits end when their event comes, and each sub-test's 160 s bound is far away
    _passes(runner, cluster, tmp_path, "0098", multiplier=1)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_0129_fetch_aborted_msgs(runner: Path, cluster: ClusterProcess, tmp_path: Path) -> None:
    _passes(runner, cluster, tmp_path, "0129")
