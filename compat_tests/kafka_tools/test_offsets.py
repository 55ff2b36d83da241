"""kafka-get-offsets.sh (GetOffsetShell) and kafka-delete-records.sh (DeleteRecordsCommand)."""

from __future__ import annotations

import json
from pathlib import Path

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Rec, topic_name
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.embedded import BrokerProcess

BASE_TS = 1_700_000_000_000
TIMESTAMPS = {  # per partition, by offset: not monotonic, so max-timestamp has to look
    0: [BASE_TS + 1000, BASE_TS + 5000, BASE_TS + 3000, BASE_TS + 4000],
    1: [BASE_TS + 2000, BASE_TS + 2500],
    2: [],
}


def offsets(kafka_tools: KafkaTools, broker: BrokerProcess, topic: str, *how: str) -> list[str]:
    out = kafka_tools.run("kafka-get-offsets", "--bootstrap-server", broker.bootstrap,
                          "--topic", topic, *how)  # fmt: skip
    return out.lines


def test_get_offsets_then_delete_records(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = topic_name("offsets")
    admin = ck.admin(shared_broker.bootstrap)
    ck.create_topic(admin, topic, 3)
    records = [
        Rec(p, i, f"k{p}{i}".encode(), f"v{p}{i}".encode(), (), ts)
        for p, stamps in TIMESTAMPS.items()
        for i, ts in enumerate(stamps)
    ]
    ck.produce_all(ck.producer(shared_broker.bootstrap), topic, records)

    latest = [f"{topic}:0:4", f"{topic}:1:2", f"{topic}:2:0"]
    assert offsets(kafka_tools, shared_broker, topic) == latest  # --time latest by default
    assert offsets(kafka_tools, shared_broker, topic, "--time", "-1") == latest
    earliest = [f"{topic}:0:0", f"{topic}:1:0", f"{topic}:2:0"]
    assert offsets(kafka_tools, shared_broker, topic, "--time", "earliest") == earliest
    # max-timestamp: the offset of the largest timestamp; an empty partition has none
    assert offsets(kafka_tools, shared_broker, topic, "--time", "max-timestamp") == [
        f"{topic}:0:1", f"{topic}:1:1"
    ]
    # a timestamp: the first offset whose timestamp is at least that; none past the end
    assert offsets(kafka_tools, shared_broker, topic, "--time", str(BASE_TS + 2500)) == [
        f"{topic}:0:1", f"{topic}:1:1"
    ]
    assert offsets(kafka_tools, shared_broker, topic, "--time", str(BASE_TS + 4500)) == [
        f"{topic}:0:1"
    ]
    assert offsets(kafka_tools, shared_broker, topic, "--time", str(BASE_TS + 9000)) == []
    assert offsets(kafka_tools, shared_broker, topic, "--time", str(BASE_TS)) == [
        f"{topic}:0:0", f"{topic}:1:0"
    ]
    # --partitions narrows the listing
    assert offsets(kafka_tools, shared_broker, topic, "--partitions", "1,2") == latest[1:]

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({
        "version": 1,
        "partitions": [
            {"topic": topic, "partition": 0, "offset": 3},
            {"topic": topic, "partition": 1, "offset": -1},  # -1: up to the high watermark
        ],
    }))  # fmt: skip
    deleted = kafka_tools.run("kafka-delete-records", "--bootstrap-server",
                              shared_broker.bootstrap, "--offset-json-file", str(plan))  # fmt: skip
    assert deleted.lines[:2] == ["Executing records delete operation",
                                 "Records delete operation completed:"]  # fmt: skip
    assert sorted(deleted.lines[2:]) == [
        f"partition: {topic}-0\tlow_watermark: 3",
        f"partition: {topic}-1\tlow_watermark: 2",
    ]
    assert offsets(kafka_tools, shared_broker, topic, "--time", "earliest") == [
        f"{topic}:0:3", f"{topic}:1:2", f"{topic}:2:0"
    ]
    consumer = ck.consumer(shared_broker.bootstrap)
    try:
        assert ck.watermarks(consumer, topic, 0) == (3, 4)
        assert ck.watermarks(consumer, topic, 1) == (2, 2)
    finally:
        consumer.close()

    # Beyond the high watermark: the broker refuses, the tool reports it per partition.
    plan.write_text(json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 99}]}
    ))  # fmt: skip
    refused = kafka_tools.run("kafka-delete-records", "--bootstrap-server",
                              shared_broker.bootstrap, "--offset-json-file", str(plan),
                              check=False)  # fmt: skip
    assert f"partition: {topic}-0\terror: org.apache.kafka.common.errors."\
        "OffsetOutOfRangeException" in refused.stdout, refused.describe()
    assert offsets(kafka_tools, shared_broker, topic, "--time", "earliest")[0] == f"{topic}:0:3"
