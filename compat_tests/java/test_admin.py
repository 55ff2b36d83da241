"""The Java Admin client: cluster, topics, configs, partitions, offsets, record deletion."""

from __future__ import annotations

from typing import Any

from compat_tests.java.checks import error_of, no_error
from compat_tests.java.harness import JavaHarness
from strom.broker.testing.embedded import BrokerProcess


def test_describe_cluster(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "cluster")
    cluster = events.one("cluster")
    host, port = strom_broker.bootstrap.rsplit(":", 1)
    assert len(cluster["nodes"]) == 1
    node = cluster["nodes"][0]
    assert (node["host"], node["port"]) == (host, int(port))
    assert cluster["controller"]["id"] == node["id"]
    assert isinstance(cluster["cluster_id"], str)
    assert len(cluster["cluster_id"]) == 22  # a base64 UUID, as Kafka's
    operations = events.one("cluster_operations")["operations"]
    assert operations is not None
    assert "DESCRIBE" in operations
    assert "CREATE" in operations
    assert events.one("topics")["names"] == []


def test_create_and_describe_topics(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "create-topics", prefix="ct")
    created = {e["name"]: e for e in events.of("created")}
    assert set(created) == {"ct-multi", "ct-defaults", "ct-single"}
    shape = {n: (e["partitions"], e["replication_factor"]) for n, e in created.items()}
    assert shape == {"ct-multi": (4, 1), "ct-defaults": (1, 1), "ct-single": (1, 1)}
    ids = {name: e["topic_id"] for name, e in created.items()}
    assert len(set(ids.values())) == 3
    assert "AAAAAAAAAAAAAAAAAAAAAA" not in ids.values()

    # CreateTopics v5+ returns every config of the new topic, with its source.
    configs = created["ct-multi"]["configs"]
    for name, value in {
        "retention.ms": "3600000",
        "max.message.bytes": "200000",
        "segment.bytes": "1048576",
        "cleanup.policy": "delete",
    }.items():
        assert configs[name]["value"] == value, name
        assert configs[name]["source"] == "DYNAMIC_TOPIC_CONFIG", name
    assert configs["compression.type"]["value"] == "producer"
    assert configs["compression.type"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    defaults = created["ct-defaults"]["configs"]
    assert defaults["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"

    validate = events.one("validate_only")
    no_error(validate["outcome"])
    assert validate["listed"] is False

    expected_errors = {
        "exists": "TopicExistsException",
        "bad_config_value": "InvalidConfigurationException",
        "unknown_config": "InvalidConfigurationException",
        "zero_partitions": "InvalidPartitionsException",
        "replication_factor_3": "InvalidReplicationFactorException",
        "bad_name": "InvalidTopicException",
        "long_name": "InvalidTopicException",
        "dot_name": "InvalidTopicException",
    }
    got_errors = {e["case"]: error_of(e["outcome"]) for e in events.of("create_error")}
    assert got_errors == expected_errors

    mixed = events.one("mixed")["outcomes"]
    assert mixed["ct-mixed-ok"]["error"] is None
    assert mixed["ct-single"]["error"] == "TopicExistsException"

    described = {e["topic"]["name"]: e["topic"] for e in events.of("described", by="name")}
    assert set(described) == set(created)
    for name, topic in described.items():
        assert topic["topic_id"] == ids[name]
        assert topic["internal"] is False
        parts = topic["partitions"]
        assert [p["partition"] for p in parts] == list(range(created[name]["partitions"]))
        for p in parts:
            assert p["leader"] == 1
            assert p["replicas"] == [1]
            assert p["isr"] == [1]

    for event in events.of("described_by_id"):
        topic = no_error(event["outcome"])
        assert topic["topic_id"] == event["id"]
        assert topic == described[topic["name"]]
    assert len(events.of("described_by_id")) == 3

    missing = {e["by"]: error_of(e["outcome"]) for e in events.of("describe_missing")}
    assert missing == {"name": "UnknownTopicOrPartitionException", "id": "UnknownTopicIdException"}
    assert events.one("listed")["names"] == sorted([*created, "ct-mixed-ok"])


def _entry(entries: dict[str, Any], name: str) -> tuple[str | None, str]:
    entry = entries[name]
    return entry["value"], entry["source"]


def test_describe_and_alter_configs(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "configs", topic="cfg")
    topic = events.one("topic_configs")["entries"]
    assert _entry(topic, "retention.ms") == ("86400000", "DYNAMIC_TOPIC_CONFIG")
    assert _entry(topic, "max.message.bytes") == ("100000", "DYNAMIC_TOPIC_CONFIG")
    assert _entry(topic, "cleanup.policy") == ("delete", "DYNAMIC_TOPIC_CONFIG")
    # Synonyms: the topic value first, then what it would fall back to.
    retention = topic["retention.ms"]
    assert retention["synonyms"][0] == {
        "name": "retention.ms", "value": "86400000", "source": "DYNAMIC_TOPIC_CONFIG",
    }  # fmt: skip
    assert any(s["name"].startswith("log.retention") for s in retention["synonyms"][1:])
    assert retention["type"] == "LONG"
    assert retention["has_doc"] is True
    assert retention["read_only"] is False
    assert retention["sensitive"] is False
    assert topic["cleanup.policy"]["type"] == "LIST"
    for name in ("segment.bytes", "min.insync.replicas", "message.timestamp.type"):
        assert name in topic, name

    broker = events.one("broker_configs")
    assert broker["broker"] == 1
    entries = broker["entries"]
    for name in ("log.retention.hours", "num.partitions", "log.dirs", "auto.create.topics.enable"):
        assert name in entries, name
    assert entries["num.partitions"]["value"] == "1"
    assert entries["node.id"]["value"] == "1"
    assert sorted(events.one("both_configs")["resources"]) == ["BROKER:1", "TOPIC:cfg"]

    after = {e["phase"]: e["entries"] for e in events.of("configs_after")}
    incremental = after["incremental"]
    assert (incremental["retention.ms"]["value"], incremental["retention.ms"]["source"]) == (
        "1234567", "DYNAMIC_TOPIC_CONFIG",
    )  # fmt: skip
    assert incremental["max.message.bytes"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    assert incremental["cleanup.policy"]["value"] == "delete,compact"
    assert incremental["segment.ms"] == {"value": "600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert after["subtract"]["cleanup.policy"]["value"] == "compact"
    assert after["validate_only"]["retention.ms"]["value"] == "1234567"

    alter_errors = {e["case"]: error_of(e["outcome"]) for e in events.of("alter_error")}
    assert alter_errors == {
        "unknown_topic": "UnknownTopicOrPartitionException",
        "bad_value": "InvalidConfigurationException",
        "unknown_config": "InvalidConfigurationException",
        "append_to_scalar": "InvalidConfigurationException",
        "duplicate_key": "InvalidRequestException",
    }
    assert after["failed_alters"] == after["validate_only"]

    if java_harness.client != "3.9":  # Kafka 4.0 removed Admin#alterConfigs
        assert "legacy" not in after
        return
    legacy = after["legacy"]
    assert legacy["retention.ms"] == {"value": "999999", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert legacy["segment.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    assert legacy["cleanup.policy"]["value"] == "delete"
    assert legacy["cleanup.policy"]["source"] != "DYNAMIC_TOPIC_CONFIG"


def test_create_partitions(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "create-partitions", topic="grow")
    grown = events.one("grown")["topic"]
    assert [p["partition"] for p in grown["partitions"]] == [0, 1, 2, 3]
    assert all(p["leader"] == 1 for p in grown["partitions"])
    errors = {e["case"]: error_of(e["outcome"]) for e in events.of("grow_error")}
    assert errors == {
        "validate_only": None,
        "decrease": "InvalidPartitionsException",
        "same_count": "InvalidPartitionsException",
        "unknown_topic": "UnknownTopicOrPartitionException",
    }
    assert events.one("after_validate_only")["partitions"] == 4
    sent = [(e["metadata"]["partition"], e["metadata"]["offset"]) for e in events.of("sent")]
    assert sent == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert events.one("end_offsets")["offsets"] == {"0": 1, "1": 1, "2": 1, "3": 1}
    got = {(e["record"]["partition"], e["value_text"]) for e in events.of("received")}
    assert got == {(0, "before 0"), (1, "before 1"), (2, "after 2"), (3, "after 3")}


def test_delete_topics(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "delete-topics", prefix="dt")
    for by in ("name", "id"):
        no_error(events.one("deleted", by=by)["outcome"])
    described = {e["by"]: error_of(e["outcome"]) for e in events.of("describe_deleted")}
    assert described == {
        "name": "UnknownTopicOrPartitionException",
        "id": "UnknownTopicIdException",
    }
    assert events.one("listed")["names"] == ["dt-kept"]
    errors = {e["case"]: error_of(e["outcome"]) for e in events.of("delete_error")}
    assert errors == {
        "unknown_name": "UnknownTopicOrPartitionException",
        "unknown_id": "UnknownTopicIdException",
        "deleted_again": "UnknownTopicOrPartitionException",
    }
    recreated = events.one("recreated")
    assert recreated["new_id"] != recreated["old_id"]
    assert recreated["attempts"] == 1, "a deleted topic's name should be free at once (KRaft)"
    assert recreated["end_offsets"] == {"0": 0, "1": 0}
    kept = events.one("kept")["topic"]
    assert kept["name"] == "dt-kept"
    assert len(kept["partitions"]) == 2


def test_list_offsets(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "list-offsets", topic="lo")
    base = events.one("base")["timestamp"]
    deltas = [1000, 5000, 3000, 2000, 4000, 1500]
    sent = [e["metadata"] for e in events.of("sent")]
    assert [(m["partition"], m["offset"]) for m in sent] == [
        *((0, i) for i in range(6)), *((1, i) for i in range(3)),
    ]  # fmt: skip
    assert [m["timestamp"] - base for m in sent[:6]] == deltas

    def result(spec: str, partition: int, isolation: str = "READ_UNCOMMITTED") -> tuple[int, int]:
        r = events.one("list_offsets", spec=spec, partition=partition, isolation=isolation)
        return r["result"]["offset"], r["result"]["timestamp"]

    for isolation in ("READ_UNCOMMITTED", "READ_COMMITTED"):
        assert [result("earliest", p, isolation)[0] for p in range(3)] == [0, 0, 0]
        assert [result("latest", p, isolation)[0] for p in range(3)] == [6, 3, 0]
    assert result("max_timestamp", 0) == (1, base + 5000)
    assert result("max_timestamp", 1) == (2, base + 10_002)
    assert result("max_timestamp", 2) == (-1, -1)
    assert result("ts_base", 0) == (0, base + 1000)
    assert result("ts_base+2500", 0) == (1, base + 5000)
    assert result("ts_base+5000", 0) == (1, base + 5000)
    assert result("ts_base+5001", 0) == (-1, -1)
    assert result("ts_base+5001", 1) == (0, base + 10_000)
    assert result("ts_base+10001", 1) == (1, base + 10_001)
    assert result("ts_base", 2) == (-1, -1)
    for event in events.of("list_offsets", partition=0, spec="latest"):
        assert event["result"]["leader_epoch"] == 0
    mixed = {e["partition"]: e["result"]["offset"] for e in events.of("list_offsets_mixed")}
    assert mixed == {0: 1, 1: 0, 2: 0}
    errors = {e["case"]: error_of(e["outcome"]) for e in events.of("list_error")}
    assert errors == {"unknown_topic": "UnknownTopicOrPartitionException"}


def test_delete_records(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "delete-records", topic="dr")
    first = events.one("deleted_records", case="first")["low_watermarks"]
    assert no_error(first["0"]) == 4
    assert no_error(first["1"]) == 10
    cases = {e["case"]: e["outcome"] for e in events.of("deleted_records") if "outcome" in e}
    assert no_error(cases["again_4"]) == 4
    assert no_error(cases["below_start_2"]) == 4
    assert error_of(cases["beyond_end_11"]) == "OffsetOutOfRangeException"
    assert events.one("list_offsets", spec="earliest")["offsets"] == {"0": 4, "1": 10}
    assert events.one("list_offsets", spec="latest")["offsets"] == {"0": 10, "1": 10}
    consumer = events.one("consumer_offsets")
    assert consumer["beginning"] == {"0": 4, "1": 10}
    assert consumer["end"] == {"0": 10, "1": 10}
    assert events.one("position", case="seek_to_beginning")["position"] == 4
    got = [(e["offset"], e["value_text"]) for e in events.of("received")]
    assert got == [(i, f"p0-{i}") for i in range(4, 10)]
    below_start = events.one("below_start", reset="none")["outcome"]
    assert below_start["error"] == "OffsetOutOfRangeException"
    assert events.one("below_start", reset="earliest")["first_offset"] == 4
