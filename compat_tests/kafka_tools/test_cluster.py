"""The node as a whole: kafka-features.sh, kafka-log-dirs.sh, and kafka-configs.sh on broker
loggers."""

from __future__ import annotations

import json
import re

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import now_ms, sample_records, topic_name
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.embedded import BrokerProcess


def test_features_describe(kafka_tools: KafkaTools, shared_broker: BrokerProcess) -> None:
    """ApiVersions' supported and finalized features: Strom bootstraps metadata.version 4.0-IV3
    and supports 3.3-IV3 to 4.0-IV3, eligible.leader.replicas.version 0-1 (not finalized:
    level 0) and transaction.version 0-2 (finalized at 2, as Kafka 4.0 formats a new
    cluster); the epoch is the metadata log offset of the image."""
    out = kafka_tools.run("kafka-features", "--bootstrap-server", shared_broker.bootstrap,
                          "describe")  # fmt: skip
    [elr, line, txn] = out.lines
    assert re.fullmatch(
        r"Feature: eligible\.leader\.replicas\.version\tSupportedMinVersion: 0\t"
        r"SupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: \d+",
        elr,
    ), out.describe()
    assert re.fullmatch(
        r"Feature: metadata\.version\tSupportedMinVersion: 3\.3-IV3\t"
        r"SupportedMaxVersion: 4\.0-IV3\tFinalizedVersionLevel: 4\.0-IV3\tEpoch: \d+",
        line,
    ), out.describe()
    assert re.fullmatch(
        r"Feature: transaction\.version\tSupportedMinVersion: 0\t"
        r"SupportedMaxVersion: 2\tFinalizedVersionLevel: 2\tEpoch: \d+",
        txn,
    ), out.describe()


def test_log_dirs_describe(kafka_tools: KafkaTools, shared_broker: BrokerProcess) -> None:
    """The sizes reported are the partitions' segment bytes on disk."""
    topic = topic_name("logdirs")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 2)
    records = sample_records(2, 20, base_ts=now_ms())
    records = [r for r in records if r.partition == 1]  # partition 0 stays empty
    ck.produce_all(ck.producer(shared_broker.bootstrap), topic, records)

    out = kafka_tools.run("kafka-log-dirs", "--bootstrap-server", shared_broker.bootstrap,
                          "--describe", "--topic-list", topic)  # fmt: skip
    assert out.lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1",
    ]
    report = json.loads(out.lines[2])
    [broker] = report["brokers"]
    assert broker["broker"] == 1
    [log_dir] = broker["logDirs"]
    assert log_dir["error"] is None
    assert log_dir["logDir"] == str(shared_broker.data_dir)
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    on_disk = {
        f"{topic}-{p}": sum(f.stat().st_size
                            for f in (shared_broker.data_dir / f"{topic}-{p}").glob("*.log"))
        for p in range(2)
    }  # fmt: skip
    assert sizes == on_disk
    assert sizes[f"{topic}-0"] == 0 < sizes[f"{topic}-1"]
    assert {p["offsetLag"] for p in log_dir["partitions"]} == {0}
    assert {p["isFuture"] for p in log_dir["partitions"]} == {False}


def test_broker_loggers(kafka_tools: KafkaTools, strom_broker: BrokerProcess) -> None:
    """Logger levels are broker-logger configs: described, then altered at run time."""
    boot = ("--bootstrap-server", strom_broker.bootstrap)
    entity = ("--entity-type", "broker-loggers", "--entity-name", "1")
    before = kafka_tools.run("kafka-configs", *boot, "--describe", *entity)
    assert before.lines[0] == "Dynamic configs for broker-logger 1 are:"
    assert "  root=INFO sensitive=false synonyms={}" in before.lines
    assert "  strom.groups=INFO sensitive=false synonyms={}" in before.lines

    altered = kafka_tools.run("kafka-configs", *boot, "--alter", *entity, "--add-config",
                              "strom.groups=DEBUG")  # fmt: skip
    assert altered.lines == ["Completed updating config for broker-logger 1."]
    after = kafka_tools.run("kafka-configs", *boot, "--describe", *entity)
    assert "  strom.groups=DEBUG sensitive=false synonyms={}" in after.lines
    assert set(after.lines) - set(before.lines) == {
        "  strom.groups=DEBUG sensitive=false synonyms={}"
    }
