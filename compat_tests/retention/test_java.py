"""The stock Java client against retention, compaction and per-topic storage configs."""

from __future__ import annotations

import time

from compat_tests.helpers import stored_codecs, topic_name, wait_until
from compat_tests.java.checks import assert_round_trip
from compat_tests.retention.conftest import RetentionHarness
from compat_tests.retention.test_confluent import cleaned_through
from strom.broker.testing.embedded import BrokerProcess


def test_admin_sees_cleanup_policy_compact_and_the_topic_compacts(
    retention_java: RetentionHarness, cleaning_broker: BrokerProcess
) -> None:
    topic = topic_name("connect-offsets")
    events = retention_java.run(cleaning_broker, "compact-topic", topic=topic, keys=5, records=200)
    created = events.one("created")["cleanup_policy"]
    assert (created["value"], created["source"]) == ("compact", "DYNAMIC_TOPIC_CONFIG")
    described = events.one("described")
    assert described["cleanup_policy"]["value"] == "compact"
    assert described["cleanup_policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert described["only_compact"] is True  # what Connect's TopicAdmin verifies
    assert events.one("altered")["delete_retention_ms"]["value"] == "50"
    keyless = events.one("keyless")
    assert keyless["error"] == "InvalidRecordException", keyless

    sent = events.of("sent")
    newest: dict[str, tuple[int, str | None]] = {}
    for e in sent:
        newest[e["key"]] = (e["offset"], e["value"])
    wait_until(
        lambda: cleaned_through(cleaning_broker, topic, 100),
        timeout=30,
        what="the cleaner to pass offset 100",
    )
    read = retention_java.run(cleaning_broker, "read-compacted", topic=topic).one("read")
    records = read["records"]
    offsets = [r["offset"] for r in records]
    assert offsets == sorted(set(offsets))
    assert len(records) < len(sent)  # compacted: gaps the consumer walked over
    assert read["end"] == len(sent)
    by_offset = {e["offset"]: (e["key"], e["value"]) for e in sent}
    for r in records:
        assert by_offset[r["offset"]] == (r["key"], r["value"])
    visible = {(r["offset"], r["key"], r["value"]) for r in records}
    for key, (offset, value) in newest.items():
        if value is not None:
            assert (offset, key, value) in visible


def test_recompression_and_log_append_time_reach_the_java_consumer(
    retention_java: RetentionHarness, cleaning_broker: BrokerProcess
) -> None:
    """The producer sends lz4; the topic says gzip and LogAppendTime: the broker stores gzip
    with its own timestamps, and the Java consumer reads every record back unchanged."""
    topic = topic_name("recompressed")
    started = int(time.time() * 1000)
    events = retention_java.run(
        cleaning_broker, "produce-consume", topic=topic, compression="lz4", records=150,
        topic_config="compression.type=gzip;message.timestamp.type=LogAppendTime",
    )  # fmt: skip
    assert_round_trip(events.of("sent"), events.of("received"), log_append_after=started)
    assert {e["record"]["timestamp_type"] for e in events.of("received")} == {"LogAppendTime"}
    assert stored_codecs(cleaning_broker.data_dir, topic) == {"gzip"}
