"""Spark's Kafka source and sink access patterns, through the stock Java client."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from compat_tests.java.checks import assert_round_trip
from compat_tests.java.harness import Event, JavaHarness
from strom.broker.testing.embedded import BrokerProcess


def _sent_by_position(sent: list[Event]) -> dict[tuple[int, int], Event]:
    return {(e["metadata"]["partition"], e["metadata"]["offset"]): e for e in sent}


@pytest.mark.parametrize(
    ("compression", "isolation"), [("lz4", "read_uncommitted"), ("zstd", "read_committed")]
)
def test_micro_batches(
    java_harness: JavaHarness, strom_broker: BrokerProcess, compression: str, isolation: str
) -> None:
    """Three micro-batches: the driver plans [previous end, latest) per partition with the Admin
    client; split ranges are read by cached executor consumers (seek before every poll); then a
    timestamp-started query and a read across deleted records (failOnDataLoss=false). Spark's
    `kafka.isolation.level` goes to both listOffsets and the executors' consumers."""
    events = java_harness.run(
        strom_broker, "spark-read", topic=f"spark-{compression}", compression=compression,
        isolation=isolation,
    )  # fmt: skip
    sent = events.of("sent")
    sent_at = _sent_by_position(sent)
    assert len(sent_at) == len(sent) == 360
    per_round = 120 // 3

    # Each round plans exactly the new records, and the split ranges read them all, once.
    for rnd in range(3):
        batch = events.one("batch", round=rnd)
        assert batch["start"] == {str(p): rnd * per_round for p in range(3)}
        assert batch["end"] == {str(p): (rnd + 1) * per_round for p in range(3)}
        reads = events.of("read", round=rnd)
        assert len(reads) == 6
        as_received: list[Event] = []
        for read in reads:
            offsets = [r["offset"] for r in read["records"]]
            assert offsets == list(range(read["from"], read["until"])), read["partition"]
            assert all(r["partition"] == read["partition"] for r in read["records"])
            as_received += [{"event": "received", "record": r} for r in read["records"]]
        round_sent = [e for e in sent if e["round"] == rnd]
        assert_round_trip(round_sent, as_received, order="increasing")
    assert not events.of("data_loss", label=0)

    # startingOffsetsByTimestamp: the first offset whose timestamp is >= the query, per partition.
    start = events.one("timestamp_start")
    for p in range(3):
        stamps = sorted(
            (off, e["metadata"]["timestamp"]) for (part, off), e in sent_at.items() if part == p
        )
        expected = next((off for off, ts in stamps if ts >= start["timestamp"]), -1)
        assert start["offsets"][str(p)] == expected, p
        read = events.one("timestamp_read", partition=p)
        assert read["offsets"] == list(range(read["from"], read["until"]))

    # Reading [0, end) after deleteRecords: OffsetOutOfRange, then the available range is used.
    after = events.one("read_after_delete")
    low = after["low_watermark"]
    assert low == after["until"] // 2
    loss = events.one("data_loss", label="after_delete")
    assert (loss["wanted"], loss["earliest"], loss["latest"]) == (0, low, after["until"])
    assert loss["error"] == "OffsetOutOfRangeException"
    assert after["offsets"] == list(range(low, after["until"]))


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_sink_tasks(
    java_harness: JavaHarness, strom_broker: BrokerProcess, compression: str
) -> None:
    """Three sink tasks write concurrently, each through its own idempotent producer, keyed rows
    to the default partitioner and some rows to an explicit partition; a batch query reads it
    all back."""
    events = java_harness.run(
        strom_broker, "spark-write", topic=f"sink-{compression}", compression=compression
    )
    sent, received = events.of("sent"), events.of("received")
    assert len(sent) == 600
    assert_round_trip(sent, received, order="any")
    per_task: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for e in sent:
        per_task[e["task"]][e["metadata"]["partition"]].append(e["metadata"]["offset"])
    for task, partitions in per_task.items():
        for partition, offsets in partitions.items():
            assert offsets == sorted(offsets), (task, partition)
    batch: dict[str, Any] = events.one("batch")
    assert set(batch["start"].values()) == {0}
    assert sum(batch["end"].values()) == 600
