"""`strom topic|group|produce|consume|cluster|config` against a real `strom serve`."""

from __future__ import annotations

import json
import subprocess
import sys

from strom.broker.testing.embedded import BrokerProcess, child_environment
from tests.cli.helpers import ok, ok_json, strom


def test_topic_lifecycle(strom_broker: BrokerProcess) -> None:
    b = strom_broker.bootstrap
    created = ok_json(b, "topic", "create", "orders", "-p", "3", "-c", "retention.ms=60000")
    assert created == [{"topic": "orders", "status": "created"}]
    assert {"name": "orders", "partitions": 3, "replicas": 1} in ok_json(b, "topic", "list")
    described = ok_json(b, "topic", "describe", "orders")
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert described["configs"] == {"retention.ms": "60000"}
    assert all(p["leader"] == 1 and p["isr"] == [1] for p in described["partitions"])
    ok(
        b,
        "topic",
        "alter-config",
        "orders",
        "--set",
        "cleanup.policy=compact",
        "--delete",
        "retention.ms",
    )
    assert ok_json(b, "topic", "describe", "orders")["configs"] == {"cleanup.policy": "compact"}
    assert ok_json(b, "topic", "add-partitions", "orders", "--num", "2") == [
        {"topic": "orders", "partitions": 5}
    ]
    text = ok(b, "topic", "describe", "orders")
    assert "PARTITIONS" in text
    assert "HIGH-WATERMARK" in text
    ok(b, "topic", "delete", "orders")
    assert "orders" not in {t["name"] for t in ok_json(b, "topic", "list")}


def test_errors_are_one_line_with_exit_codes_scripts_can_trust(strom_broker: BrokerProcess) -> None:
    b = strom_broker.bootstrap
    ok(b, "topic", "create", "once")
    again = strom(b, "topic", "create", "once")
    assert again.returncode == 1
    assert again.stderr.splitlines() == [
        "strom: error: creating once: TOPIC_ALREADY_EXISTS: Topic 'once' already exists."
    ]
    assert strom(b, "topic", "create", "once", "--if-not-exists").returncode == 0
    missing = strom(b, "topic", "describe", "nowhere")
    assert (missing.returncode, missing.stderr) == (
        1,
        "strom: error: topic nowhere: UNKNOWN_TOPIC_OR_PART\n",
    )
    usage = strom(b, "topic", "create")
    assert usage.returncode == 2
    assert len(usage.stderr.strip().splitlines()) == 1
    unreachable = subprocess.run(
        [sys.executable, "-m", "strom", "--brokers", "127.0.0.1:1", "--timeout", "1", "topic", "list"],
        capture_output=True, text=True, timeout=60, env=child_environment(),
    )  # fmt: skip
    assert unreachable.returncode == 3
    assert unreachable.stderr.startswith("strom: error: no answer from 127.0.0.1:1 within 1s")
    assert len(unreachable.stderr.splitlines()) == 1


def test_produce_and_consume_with_format_strings_keys_and_headers(
    strom_broker: BrokerProcess,
) -> None:
    b = strom_broker.bootstrap
    ok(b, "topic", "create", "events", "-p", "1")
    produced = ok_json(
        b, "produce", "events", "-f", "%k|%v\\n", "-H", "source=cli",
        stdin="user-1|signed up\nuser-2|paid 10\n",
    )  # fmt: skip
    assert produced["produced"] == 2
    assert [r["offset"] for r in produced["records"]] == [0, 1]
    ok(b, "produce", "events", "-k", "fixed", stdin="plain value\n")
    out = ok(b, "consume", "events", "-n", "3", "-f", "%o %k=%v [%h]\\n")
    assert out.splitlines() == [
        "0 user-1=signed up [source=cli]",
        "1 user-2=paid 10 [source=cli]",
        "2 fixed=plain value []",
    ]
    records = [
        json.loads(line)
        for line in ok(b, "--format", "json", "consume", "events", "-n", "1").splitlines()
    ]
    assert records[0]["key"] == "user-1"
    assert records[0]["headers"] == {"source": "cli"}
    bad = strom(b, "produce", "events", "-f", "%k|%v\\n", stdin="no separator\n")
    assert bad.returncode == 1
    assert "does not match the format" in bad.stderr


def test_produce_by_key_lands_where_the_java_client_puts_it(strom_broker: BrokerProcess) -> None:
    """murmur2, as Kafka's default partitioner: the same key always goes to the same partition."""
    b = strom_broker.bootstrap
    ok(b, "topic", "create", "keyed", "-p", "4")
    out = ok_json(b, "produce", "keyed", "-f", "%k %v\\n", stdin="a 1\na 2\nb 3\nb 4\n")
    partitions = [r["partition"] for r in out["records"]]
    assert partitions[0] == partitions[1]
    assert partitions[2] == partitions[3]


def test_group_describe_lag_seek_and_delete(strom_broker: BrokerProcess) -> None:
    b = strom_broker.bootstrap
    ok(b, "topic", "create", "jobs", "-p", "2")
    ok(b, "produce", "jobs", "-p", "0", stdin="a\nb\nc\n")
    ok(b, "consume", "jobs", "-g", "workers", "-n", "3")
    assert {"group": "workers", "state": "Empty"} in ok_json(b, "group", "list")
    described = ok_json(b, "group", "describe", "workers")
    assert described["state"] == "Empty"
    assert [(p["partition"], p["committed"], p["lag"]) for p in described["partitions"]] == [
        (0, 3, 0)
    ]
    seek = ok_json(b, "group", "seek", "workers", "--to", "start")
    assert seek["offsets"] == [{"topic": "jobs", "partition": 0, "offset": 0}]
    assert ok_json(b, "group", "describe", "workers")["total_lag"] == 3
    ok(b, "group", "seek", "workers", "--to", "2", "--topic", "jobs:0")
    assert ok_json(b, "group", "describe", "workers")["partitions"][0]["committed"] == 2
    dry = ok_json(b, "group", "seek", "workers", "--to", "end", "--dry-run")
    assert dry["offsets"][0]["offset"] == 3
    assert ok_json(b, "group", "describe", "workers")["partitions"][0]["committed"] == 2
    ok(b, "group", "delete", "workers")
    assert "workers" not in {g["group"] for g in ok_json(b, "group", "list")}


def test_cluster_info_health_and_quorum(strom_broker: BrokerProcess) -> None:
    b = strom_broker.bootstrap
    info = ok_json(b, "cluster", "info")
    assert info["controller"] == 1
    assert [(n["id"], f"{n['host']}:{n['port']}") for n in info["brokers"]] == [(1, b)]
    health = ok_json(b, "cluster", "health")
    assert health["healthy"] is True
    assert health["down_brokers"] == []
    quorum = ok_json(b, "cluster", "quorum")
    assert quorum["leader"] == 1
    assert quorum["replicas"][0]["role"] == "leader"
    assert "HIGH WATERMARK" in ok(b, "cluster", "quorum")


def test_config_get_and_set_for_topics_and_brokers(strom_broker: BrokerProcess) -> None:
    b = strom_broker.bootstrap
    ok(b, "topic", "create", "conf")
    ok(b, "config", "set", "topic", "conf", "max.message.bytes=2048")
    (entry,) = ok_json(b, "config", "get", "topic", "conf", "max.message.bytes")
    assert entry["value"] == "2048"
    assert entry["source"] == "DYNAMIC_TOPIC_CONFIG"
    ok(b, "config", "set", "broker", "1", "log.retention.ms=3600000")
    (entry,) = ok_json(b, "config", "get", "broker", "1", "log.retention.ms")
    assert entry["value"] == "3600000"
    assert entry["source"] == "DYNAMIC_BROKER_CONFIG"
    ok(b, "config", "set", "broker", "1", "--delete", "log.retention.ms")
    (entry,) = ok_json(b, "config", "get", "broker", "1", "log.retention.ms")
    assert entry["source"] != "DYNAMIC_BROKER_CONFIG"
    ok(b, "config", "set", "group", "conf-app", "consumer.session.timeout.ms=50000")
    (entry,) = ok_json(b, "config", "get", "group", "conf-app", "consumer.session.timeout.ms")
    assert (entry["value"], entry["source"]) == ("50000", "GROUP_CONFIG")
    refused = strom(b, "config", "set", "broker", "1", "log.dirs=/tmp")
    assert refused.returncode == 1
    assert refused.stderr.startswith("strom: error: altering 1: ")
