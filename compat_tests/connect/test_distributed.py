"""Kafka Connect 4.x in distributed mode on Strom: its internal topics, its group, FileStream
source and sink connectors driven through the REST API, and a worker restart.

One worker serves the module (a worker start costs several seconds of JVM time); the tests
run in file order and the last one restarts it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.ck import ConfigResource, ResourceType
from compat_tests.connect.worker import ConnectWorker
from compat_tests.helpers import topic_name, wait_until
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.embedded import BrokerProcess

_JOINED = re.compile(
    r"Joined group at generation (?P<generation>\d+) with protocol version \d+ and got "
    r"assignment: Assignment\{error=0, leader='(?P<leader>[^']+)', leaderUrl='(?P<url>[^']+)'"
)


def topic_config(bootstrap: str, topic: str, key: str) -> str:
    admin = ck.admin(bootstrap)  # kept alive until its future is done
    [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    value: str = ck.result(future)[key].value
    return value


def partition_counts(bootstrap: str) -> dict[str, int]:
    metadata = ck.admin(bootstrap).list_topics(timeout=ck.TIMEOUT)
    return {name: len(t.partitions) for name, t in metadata.topics.items()}


def topic_values(bootstrap: str, topic: str) -> list[str]:
    """Every value in a one-partition topic, in offset order."""
    consumer = ck.consumer(bootstrap)
    try:
        _, end = ck.watermarks(consumer, topic, 0)
        consumer.assign([TopicPartition(topic, 0, 0)])
        records = ck.consume(consumer, end)
    finally:
        consumer.close()
    assert [r.offset for r in records] == list(range(end))
    assert all(r.key is None for r in records)
    return [r.value.decode() if r.value is not None else "<null>" for r in records]


def wait_for(fetch: Callable[[], object], expected: object, *, timeout: float, what: str) -> None:
    """Poll `fetch` until it returns `expected`; fail showing what it returned last."""
    seen: list[object] = []

    def check() -> bool:
        seen.append(fetch())
        return seen[-1] == expected

    try:
        wait_until(check, timeout=timeout, what=what)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; expected {expected!r}, last saw {seen[-1]!r}") from None


def chars(lines: list[str]) -> int:
    """FileStreamSource's position: Java chars (UTF-16 code units) read, newlines included."""
    return sum(len(f"{line}\n".encode("utf-16-le")) // 2 for line in lines)


def file_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_internal_topics_are_compacted_and_the_worker_leads_its_group(
    connect_worker: ConnectWorker, shared_broker: BrokerProcess, kafka_tools: KafkaTools
) -> None:
    info = connect_worker.get("/")
    assert info["version"] == "4.1.1"
    admin = ck.admin(shared_broker.bootstrap)
    cluster = admin.describe_cluster(request_timeout=ck.TIMEOUT)
    assert info["kafka_cluster_id"] == ck.result(cluster).cluster_id

    topics = connect_worker.topics
    counts = partition_counts(shared_broker.bootstrap)
    assert counts[topics.config] == 1  # Connect insists on exactly one
    assert counts[topics.offsets] == topics.offset_partitions
    assert counts[topics.status] == topics.status_partitions
    for name in (topics.config, topics.offsets, topics.status):
        assert topic_config(shared_broker.bootstrap, name, "cleanup.policy") == "compact", name

    # The worker joined its group with Connect's own protocol and leads it (it is alone).
    def joined() -> list[re.Match[str]]:
        return [m for line in list(connect_worker.output) if (m := _JOINED.search(line))]

    wait_until(joined, timeout=30, what="the worker's 'Joined group' log line")
    assert joined()[-1]["url"] == f"{connect_worker.url}/"
    assert joined()[-1]["leader"].startswith(f"connect-127.0.0.1:{connect_worker.port}-")
    groups = kafka_tools.run("kafka-groups", "--bootstrap-server", shared_broker.bootstrap,
                             "--list")  # fmt: skip
    assert [connect_worker.group, "Classic", "connect"] in [line.split() for line in groups.lines]

    plugins = {p["class"]: p["type"] for p in connect_worker.get("/connector-plugins")}
    assert plugins["org.apache.kafka.connect.file.FileStreamSourceConnector"] == "source"
    assert plugins["org.apache.kafka.connect.file.FileStreamSinkConnector"] == "sink"


# FileStreamSource stores its position in Java chars but skips that many bytes when it resumes,
# so text before a restart must be ASCII for the resumed position to be right (a limitation of
# Kafka's example connector, not of the broker); non-ASCII lines come after the restart.
FIRST = ["line one", "  leading and trailing spaces  ", "", "tab\tinside"]
SECOND = ["written while the worker was down", "last line before it came back"]
THIRD = ["strøm ✓ 中文 😀", "written while running again"]


def test_file_source_and_sink_survive_a_worker_restart(
    connect_worker: ConnectWorker, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """FileStreamSource reads a file into a topic, FileStreamSink writes that topic to a file;
    after a restart the source goes on from its stored position: no line lost or repeated."""
    topic = topic_name("connect-lines")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source, sink = f"src-{topic}", f"sink-{topic}"
    source_file.write_text("".join(f"{line}\n" for line in FIRST), encoding="utf-8")
    ck.create_topic(ck.admin(shared_broker.bootstrap), topic, 1)

    created = connect_worker.put(f"/connectors/{source}/config", {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(source_file), "topic": topic, "tasks.max": "1",
    })  # fmt: skip
    assert created["name"] == source
    connect_worker.put(f"/connectors/{sink}/config", {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "file": str(sink_file), "topics": topic, "tasks.max": "1",
    })  # fmt: skip
    wait_until(lambda: connect_worker.running(source) and connect_worker.running(sink),
               timeout=60, what="both connectors running")  # fmt: skip
    assert sorted(connect_worker.get("/connectors")) == sorted([source, sink])

    bootstrap = shared_broker.bootstrap
    wait_until(lambda: len(topic_values(bootstrap, topic)) >= len(FIRST), timeout=60,
               what="the source's records")  # fmt: skip
    assert topic_values(bootstrap, topic) == FIRST
    wait_for(lambda: file_lines(sink_file), FIRST, timeout=60, what="the sink's file")

    # The source's position is stored in the offsets topic (Connect's REST API reads it back).
    stored = {"partition": {"filename": str(source_file)}, "offset": {"position": chars(FIRST)}}
    wait_for(lambda: connect_worker.get(f"/connectors/{source}/offsets")["offsets"], [stored],
             timeout=30, what="the source's stored offset")  # fmt: skip
    # The sink's progress is its consumer group's committed offset.
    admin = ck.admin(bootstrap)

    def sink_committed() -> int | None:
        request = ConsumerGroupTopicPartitions(f"connect-{sink}")
        [future] = admin.list_consumer_group_offsets([request]).values()
        offsets = {tp.partition: tp.offset for tp in ck.result(future).topic_partitions}
        return offsets.get(0)

    wait_for(sink_committed, len(FIRST), timeout=30, what="the sink's commit")

    # Down, more lines arrive; up again, the source resumes exactly where it stopped.
    assert connect_worker.stop() == 143  # the JVM's exit status after SIGTERM
    with source_file.open("a", encoding="utf-8") as appending:
        appending.write("".join(f"{line}\n" for line in SECOND))
    connect_worker.start()
    wait_until(lambda: connect_worker.running(source) and connect_worker.running(sink),
               timeout=60, what="both connectors running again")  # fmt: skip
    with source_file.open("a", encoding="utf-8") as appending:
        appending.write("".join(f"{line}\n" for line in THIRD))

    everything = FIRST + SECOND + THIRD
    wait_until(lambda: len(topic_values(bootstrap, topic)) >= len(everything), timeout=60,
               what="the records written around the restart")  # fmt: skip
    assert topic_values(bootstrap, topic) == everything
    wait_for(lambda: file_lines(sink_file), everything, timeout=60,
             what="the sink's file after the restart")  # fmt: skip
    stored["offset"] = {"position": chars(everything)}
    wait_for(lambda: connect_worker.get(f"/connectors/{source}/offsets")["offsets"], [stored],
             timeout=30, what="the source's stored offset after the restart")  # fmt: skip

    connect_worker.delete(f"/connectors/{source}")
    connect_worker.delete(f"/connectors/{sink}")
    wait_until(lambda: connect_worker.get("/connectors") == [], timeout=30,
               what="the connectors deleted")  # fmt: skip
