"""`strom topic|group|produce|consume|cluster|config` against a real Apache Kafka broker:
the CLI is a Kafka client, not a Strom-only tool."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from compat_tests.apache_kafka import ApacheKafka
from tests.cli.helpers import ok, ok_json, strom


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ApacheKafka(tmp_path_factory.mktemp("apache-kafka")) as broker:
        yield broker.bootstrap


def test_topics_records_groups_cluster_and_configs_on_apache_kafka(kafka: str) -> None:
    b = kafka
    assert ok_json(b, "topic", "create", "orders", "-p", "2", "-c", "retention.ms=60000") == [
        {"topic": "orders", "status": "created"}
    ]
    assert strom(b, "topic", "create", "orders").returncode == 1
    described = ok_json(b, "topic", "describe", "orders")
    assert [p["partition"] for p in described["partitions"]] == [0, 1]
    assert described["configs"]["retention.ms"] == "60000"
    ok(b, "topic", "alter-config", "orders", "--set", "retention.ms=120000")
    assert ok_json(b, "topic", "describe", "orders")["configs"]["retention.ms"] == "120000"
    assert ok_json(b, "topic", "add-partitions", "orders", "--to", "3")[0]["partitions"] == 3

    produced = ok_json(b, "produce", "orders", "-p", "0", "-f", "%k %v\\n", "-H", "via=strom",
                       stdin="k1 first\nk2 second\n")  # fmt: skip
    assert [r["offset"] for r in produced["records"]] == [0, 1]
    out = ok(b, "consume", "orders", "-g", "readers", "-n", "2", "-f", "%p:%o %k=%v %h\\n")
    assert sorted(out.splitlines()) == ["0:0 k1=first via=strom", "0:1 k2=second via=strom"]
    records = [
        json.loads(line)
        for line in ok(b, "--format", "json", "consume", "orders", "-n", "1").splitlines()
    ]
    assert records[0]["headers"] == {"via": "strom"}

    group = ok_json(b, "group", "describe", "readers")
    assert group["state"] == "Empty"
    assert [(p["partition"], p["committed"], p["lag"]) for p in group["partitions"]] == [(0, 2, 0)]
    ok(b, "group", "seek", "readers", "--to", "start")
    assert ok_json(b, "group", "describe", "readers")["total_lag"] == 2
    ok(b, "group", "delete", "readers")

    info = ok_json(b, "cluster", "info")
    assert info["controller"] == 1
    assert [n["id"] for n in info["brokers"]] == [1]
    assert ok_json(b, "cluster", "health")["healthy"] is True
    quorum = ok_json(b, "cluster", "quorum")
    assert quorum["leader"] == 1

    ok(b, "config", "set", "broker", "1", "log.cleaner.threads=2")
    (entry,) = ok_json(b, "config", "get", "broker", "1", "log.cleaner.threads")
    assert entry["value"] == "2"
    assert entry["source"] == "DYNAMIC_BROKER_CONFIG"
    ok(b, "topic", "delete", "orders")
