"""The Java producer and a group-less Java consumer: every codec, timestamps, offsets, acks."""

from __future__ import annotations

import time

import pytest

from compat_tests.java.checks import assert_round_trip, error_of, no_error
from compat_tests.java.harness import JavaHarness
from strom.broker.testing.embedded import BrokerProcess

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.mark.parametrize("compression", CODECS)
def test_idempotent_round_trip(
    java_harness: JavaHarness, strom_broker: BrokerProcess, compression: str
) -> None:
    """acks=all + idempotence (the defaults), 3 partitions, batches of many records and single
    records past batch.size; every record read back with seekToBeginning/poll."""
    events = java_harness.run(
        strom_broker, "produce-consume", topic=f"rt-{compression}", compression=compression
    )
    sent, received = events.of("sent"), events.of("received")
    assert len(sent) == 300
    assert_round_trip(sent, received)
    metrics = events.one("producer_metrics")["metrics"]
    assert metrics["record-error-total"] == 0
    assert metrics["record-retry-total"] == 0, "the broker made the producer retry"
    assert metrics["records-per-request-avg"] > 1, "expected batching"
    offsets = events.one("offsets")
    assert offsets["beginning"] == {"0": 0, "1": 0, "2": 0}
    assert offsets["end"] == {"0": 100, "1": 100, "2": 100}


def test_log_append_time(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    """A LogAppendTime topic: the broker's time reaches RecordMetadata and the consumer."""
    started = int(time.time() * 1000)
    events = java_harness.run(
        strom_broker, "produce-consume", topic="lat", compression="lz4", records=120,
        topic_config="message.timestamp.type=LogAppendTime",
    )  # fmt: skip
    assert_round_trip(events.of("sent"), events.of("received"), log_append_after=started)


def test_tiny_fetch_size_still_returns_large_batches(
    java_harness: JavaHarness, strom_broker: BrokerProcess
) -> None:
    """fetch.max.bytes / max.partition.fetch.bytes below a batch's size: the broker still returns
    the first batch whole (KIP-74), so the consumer makes progress; max.poll.records=7."""
    events = java_harness.run(
        strom_broker, "produce-consume", topic="tiny-fetch", compression="zstd", records=150,
        large_every=25, fetch_max_bytes=1024, max_poll_records=7,
    )  # fmt: skip
    assert_round_trip(events.of("sent"), events.of("received"))


def test_plain_acks1_producer_read_committed(
    java_harness: JavaHarness, strom_broker: BrokerProcess
) -> None:
    """A non-idempotent acks=1 producer, one in flight, default partitioner (no explicit
    partitions); a read_committed consumer sees everything (no transactions)."""
    events = java_harness.run(
        strom_broker, "produce-consume", topic="acks1", compression="snappy", records=200,
        acks="1", idempotence=False, max_in_flight=1, explicit_partitions=False,
        isolation="read_committed",
    )  # fmt: skip
    assert_round_trip(events.of("sent"), events.of("received"))


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "sigkill"])
def test_records_survive_a_restart(
    java_harness: JavaHarness, strom_broker: BrokerProcess, clean: bool
) -> None:
    produced = java_harness.run(
        strom_broker, "produce-consume", topic="durable", compression="zstd", records=150,
        mode="produce",
    )  # fmt: skip
    strom_broker.restart(clean=clean)
    consumed = java_harness.run(
        strom_broker, "produce-consume", topic="durable", records=150, mode="consume"
    )
    assert consumed.one("offsets")["end"] == {"0": 50, "1": 50, "2": 50}
    assert_round_trip(produced.of("sent"), consumed.of("received"))


def test_consumer_offset_api(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "consumer-api", topic="pos")
    base = events.one("base")["timestamp"]
    assert [e["metadata"]["offset"] for e in events.of("sent")] == list(range(10))
    offsets = events.one("offsets")
    assert offsets["beginning"] == {"0": 0, "1": 0}
    assert offsets["end"] == {"0": 10, "1": 0}
    no_offset = events.one("position_error", case="no_offset")["outcome"]
    assert error_of(no_offset) == "NoOffsetForPartitionException"
    beginning = events.one("positions", case="beginning")
    assert (beginning["p0"], beginning["p1"]) == (0, 0)
    end = events.one("positions", case="end")
    assert (end["p0"], end["p1"]) == (10, 0)

    after_seek = events.one("after_seek")
    assert after_seek["offsets"] == [7, 8, 9], "seek into a batch must skip its earlier records"
    assert after_seek["values"] == ["v7", "v8", "v9"]
    assert after_seek["position"] == 10
    assert after_seek["lag"] == 0

    found = {e["case"]: e["found"] for e in events.of("offsets_for_times")}
    assert found["exact_3"]["offset"] == 3
    assert found["exact_3"]["timestamp"] == base + 3000
    assert found["between_3_4"]["offset"] == 4
    assert found["between_3_4"]["timestamp"] == base + 4000
    assert found["before_first"]["offset"] == 0
    assert found["after_last"] is None
    assert found["empty_partition"] is None
    assert found["exact_3"]["leader_epoch"] == 0

    none = events.one("out_of_range", reset="none")["outcome"]
    assert none["error"] == "OffsetOutOfRangeException", none
    assert events.one("out_of_range", reset="earliest")["first_offset"] == 0
    epoch_seek = events.one("epoch_seek")
    assert epoch_seek["epoch"] == 0
    assert epoch_seek["first_offset"] == 4
    assert events.one("positions", case="reset_latest")["p0"] == 10
    assert events.one("partitions_for")["partitions"] == [
        {"partition": 0, "leader": 1},
        {"partition": 1, "leader": 1},
    ]
    assert "pos" in events.one("consumer_topics")["names"]


def test_acks_modes_and_errors(java_harness: JavaHarness, strom_broker: BrokerProcess) -> None:
    events = java_harness.run(strom_broker, "producer-modes", topic="modes")
    by_mode: dict[str, list[int | None]] = {}
    for e in events.of("sent"):
        by_mode.setdefault(e["mode"], []).append(e["metadata"]["offset"])
    assert by_mode["acks1"] == [0, 1, 2, 3, 4]
    assert by_mode["acks0"] == [None] * 5  # acks=0: no offset comes back
    assert by_mode["idempotent"] == [10, 11, 12, 13, 14]
    too_large = events.one("too_large")["outcome"]
    assert too_large["error"] == "RecordTooLargeException", too_large
    assert by_mode["after_too_large"] == [15]
    got = [(r["offset"], r["value_text"]) for r in events.one("received")["records"]]
    expected = [
        *((i, f"acks1-{i}") for i in range(5)),
        *((5 + i, f"acks0-{i}") for i in range(5)),
        *((10 + i, f"idempotent-{i}") for i in range(5)),
        (15, "after"),
    ]
    assert got == expected
    auto = no_error(events.one("auto_create")["outcome"])
    assert (auto["partition"], auto["offset"]) == (0, 0)
