"""The page-view pipeline (examples/pageviews) end to end: real Spark, its `kafka` source and
sink (`spark-sql-kafka-0-10`), a real `strom serve`, exact results.

Streaming runs use `trigger(availableNow=True)`: a run reads what the topic holds when it
starts and stops when done, so no test waits on a clock. The one continuous query is stopped
once its progress reports show it has processed the input and closed the windows it can.

The expected window counts come from `closed_windows`, a model of the job in a few lines:
tumbling one-minute windows on event time, a window emitted once the watermark (latest event
time seen, less 30 s) has reached its end, late events for emitted windows dropped. Each test
also pins the totals that model must give, so a mistake in the model fails too.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from compat_tests.helpers import stored_codecs, topic_name, wait_until
from examples.pageviews.events import START_MS, PageView, iso_ms, page_views
from examples.pageviews.produce import Delivered, create_topics, produce
from examples.pageviews.readback import WindowCount, read_all, window_counts
from strom.broker.testing.embedded import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.listener import StreamingQueryProgress

pytestmark = pytest.mark.timeout(600)  # the first test also waits for Spark to start

WINDOW_MS = 60_000
SECOND = 1000


def closed_windows(events: Iterable[PageView], *, watermark_ms: int) -> list[WindowCount]:
    """Views per page per window, for the windows whose end the watermark has reached."""
    counts = Counter((e.ts_ms - e.ts_ms % WINDOW_MS, e.page) for e in events)
    return sorted(
        WindowCount(start, start + WINDOW_MS, page, n)
        for (start, page), n in counts.items()
        if start + WINDOW_MS <= watermark_ms
    )


def output(bootstrap: str, topic: str) -> list[WindowCount]:
    """The job's output topic, decoded; each (window, page) must be there once only."""
    counts = sorted(window_counts(read_all(bootstrap, topic)))
    keys = [(c.start_ms, c.page) for c in counts]
    assert len(keys) == len(set(keys)), f"a window was emitted twice: {counts}"
    return counts


def run_available_now(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: Path,
    compression: str = "none",
) -> list[StreamingQueryProgress]:
    """One availableNow run of the streaming job; returns its progress reports."""
    from examples.pageviews.stream import start_query

    query = start_query(
        spark, bootstrap=bootstrap, source=source, sink=sink, checkpoint=str(checkpoint),
        window="1 minute", watermark="30 seconds", available_now=True, compression=compression,
    )  # fmt: skip
    finished = query.awaitTermination(240)
    if not finished:
        query.stop()
    assert finished, f"the availableNow run did not finish in 240 s: {query.lastProgress}"
    assert query.exception() is None, query.exception()
    return query.recentProgress


def input_rows(progress: list[StreamingQueryProgress]) -> int:
    return sum(p.numInputRows for p in progress)


def last_partition_ends(delivered: Iterable[Delivered]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for d in delivered:
        ends[d.partition] = max(ends.get(d.partition, 0), d.offset + 1)
    return ends


def test_batch_reads_a_fixed_offset_range(
    spark: SparkSession, shared_broker: BrokerProcess
) -> None:
    """startingOffsets/endingOffsets per partition (with -1 = latest) count exactly the views
    in that range, and so do startingTimestamp/endingTimestamp (the offsets Spark looks up by
    time); the whole topic read raw, with `read_committed` and split into more tasks than
    partitions, is exactly what was produced (snappy batches): offsets, keys, values and
    timestamps (the event times)."""
    from pyspark.sql import functions as F

    from examples.pageviews.batch import count_views, offsets_json

    bootstrap = shared_broker.bootstrap
    topic = topic_name("spark-batch")
    create_topics(bootstrap, {topic: 3})
    delivered = produce(bootstrap, topic, page_views(90, seed=5), compression="snappy")
    ends = last_partition_ends(delivered)
    assert sum(ends.values()) == 90
    assert sorted(ends) == [0, 1, 2]
    assert min(ends.values()) >= 10, ends

    starting = {0: 2, 1: 0, 2: 5}
    ending = {0: ends[0] - 3, 1: -1, 2: ends[2] // 2}
    resolved = {**ending, 1: ends[1]}
    in_range = [d for d in delivered if starting[d.partition] <= d.offset < resolved[d.partition]]
    expected = Counter(d.event.page for d in in_range)
    assert sum(expected.values()) == 90 - 2 - 3 - 5 - (ends[2] - ends[2] // 2)

    views = count_views(
        spark, bootstrap=bootstrap, topic=topic,
        starting=offsets_json(topic, starting), ending=offsets_json(topic, ending),
    )  # fmt: skip
    assert views == dict(expected)

    # The default range, earliest to latest, is the whole topic.
    everything = count_views(spark, bootstrap=bootstrap, topic=topic)
    assert everything == dict(Counter(d.event.page for d in delivered))

    # Event times 0 s .. 89 s, one a second, increasing in every partition: [20 s, 61.5 s)
    # holds the events of seconds 20 to 61.
    between = count_views(
        spark, bootstrap=bootstrap, topic=topic,
        starting_ms=START_MS + 20 * SECOND, ending_ms=START_MS + 61 * SECOND + 500,
    )  # fmt: skip
    timed = [d for d in delivered if 20 * SECOND <= d.event.ts_ms - START_MS <= 61 * SECOND]
    assert len(timed) == 42
    assert between == dict(Counter(d.event.page for d in timed))

    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .option("minPartitions", "7")  # ranges split: several consumers seek in one partition
        .load()
        .select(
            "partition",
            "offset",
            "key",
            "value",
            F.unix_millis("timestamp").alias("ts"),
            "timestampType",
        )
        .collect()
    )
    got = sorted(
        (
            r["partition"],
            r["offset"],
            bytes(r["key"]),
            bytes(r["value"]),
            r["ts"],
            r["timestampType"],
        )
        for r in raw
    )
    want = sorted(
        (d.partition, d.offset, d.event.user.encode(), d.event.to_json(), d.event.ts_ms, 0)
        for d in delivered
    )
    assert got == want
    assert stored_codecs(shared_broker.data_dir, topic) == {"snappy"}


def test_batch_with_the_consumer_based_offset_reader(
    spark: SparkSession, shared_broker: BrokerProcess
) -> None:
    """With `spark.sql.streaming.kafka.useDeprecatedOffsetFetching`, Spark plans offsets with a
    consumer that subscribes in a consumer group of its own (JoinGroup, SyncGroup, then
    seekToBeginning/End and offsetsForTimes) instead of the Admin client: the same ranges give
    the same exact counts."""
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined,unused-ignore]

    from examples.pageviews.batch import count_views, offsets_json

    bootstrap = shared_broker.bootstrap
    topic = topic_name("spark-consumer-offsets")
    create_topics(bootstrap, {topic: 2})
    delivered = produce(bootstrap, topic, page_views(50, seed=7))
    ends = last_partition_ends(delivered)
    conf = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
    spark.conf.set(conf, "true")
    try:
        views = count_views(
            spark, bootstrap=bootstrap, topic=topic,
            starting=offsets_json(topic, {0: 1, 1: -2}), ending=offsets_json(topic, {0: -1, 1: 4}),
        )  # fmt: skip
        timed = count_views(
            spark, bootstrap=bootstrap, topic=topic,
            starting_ms=START_MS + 10 * SECOND, ending_ms=START_MS + 30 * SECOND,
        )  # fmt: skip
    finally:
        spark.conf.unset(conf)
    in_range = [d for d in delivered if (1 <= d.offset < ends[0]) if d.partition == 0]
    in_range += [d for d in delivered if d.partition == 1 and d.offset < 4]
    assert len(in_range) == ends[0] - 1 + 4
    assert views == dict(Counter(d.event.page for d in in_range))
    in_time = [d for d in delivered if 10 * SECOND <= d.event.ts_ms - START_MS < 30 * SECOND]
    assert len(in_time) == 20
    assert timed == dict(Counter(d.event.page for d in in_time))

    # the planning consumers really were group members: their groups are on the broker
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(request_timeout=30).result(30)
    # (one per query: Spark names them spark-kafka-relation-<query's uuid>-driver-<n>)
    spark_groups = [g.group_id for g in listed.valid if g.group_id.startswith("spark-kafka-")]
    assert len(spark_groups) == 2, [g.group_id for g in listed.valid]
    assert all(g.startswith("spark-kafka-relation-") for g in spark_groups), spark_groups


def test_batch_after_deleted_records(spark: SparkSession, shared_broker: BrokerProcess) -> None:
    """Records deleted below a new log start offset (DeleteRecords): a batch asking for offsets
    from 0 fails with failOnDataLoss=true (the default), and with failOnDataLoss=false reads
    exactly what is left."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined,unused-ignore]

    bootstrap = shared_broker.bootstrap
    topic = topic_name("spark-deleted")
    create_topics(bootstrap, {topic: 2})
    delivered = produce(bootstrap, topic, page_views(60, seed=6))
    ends = last_partition_ends(delivered)
    low = {0: ends[0] // 2, 1: 0}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, low[0])], request_timeout=30)
    [result] = [f.result(30) for f in futures.values()]
    assert result.low_watermark == low[0]

    def read(fail_on_data_loss: bool) -> list[tuple[int, int]]:
        rows = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", json.dumps({topic: {"0": 0, "1": 0}}))
            .option("failOnDataLoss", str(fail_on_data_loss).lower())
            .load()
            .select("partition", "offset")
            .collect()
        )
        return sorted((r["partition"], r["offset"]) for r in rows)

    left = sorted((d.partition, d.offset) for d in delivered if d.offset >= low[d.partition])
    assert len(left) == 60 - low[0]
    assert read(fail_on_data_loss=False) == left
    with pytest.raises(Exception, match=r"failOnDataLoss"):
        read(fail_on_data_loss=True)


def test_streaming_windows_with_watermark_and_late_events(
    spark: SparkSession, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Two availableNow runs on one checkpoint. The first closes the windows the watermark
    has passed; between the runs come on-time events and late ones for closed windows, which
    the second run drops while closing three more windows."""
    bootstrap = shared_broker.bootstrap
    source, sink = topic_name("spark-views"), topic_name("spark-counts")
    create_topics(bootstrap, {source: 3, sink: 2})
    checkpoint = tmp_path / "checkpoint"

    first = page_views(40, step_ms=6 * SECOND, seed=1)  # event times 0 s .. 234 s
    produce(bootstrap, source, first, compression="lz4")
    progress = run_available_now(spark, bootstrap, source, sink, checkpoint, compression="zstd")
    assert input_rows(progress) == 40
    # watermark 234 s - 30 s = 204 s: windows [0,60), [60,120), [120,180) are closed, and
    # hold the 30 events before 180 s
    assert progress[-1].eventTime["watermark"] == iso_ms(START_MS + 204 * SECOND)
    closed = closed_windows(first, watermark_ms=START_MS + 204 * SECOND)
    assert {c.start_ms - START_MS for c in closed} == {0, 60 * SECOND, 120 * SECOND}
    assert sum(c.views for c in closed) == 30
    assert output(bootstrap, sink) == closed

    on_time = page_views(25, start_ms=START_MS + 185 * SECOND, step_ms=10 * SECOND, seed=2)
    late = [
        PageView("/", "late-0", START_MS + 10 * SECOND),
        PageView("/docs", "late-1", START_MS + 70 * SECOND),
        PageView("/pricing", "late-2", START_MS + 179 * SECOND + 999),
    ]  # all in windows already emitted
    produce(bootstrap, source, on_time[:10] + late + on_time[10:], compression="lz4")
    progress = run_available_now(spark, bootstrap, source, sink, checkpoint, compression="zstd")
    assert input_rows(progress) == 28
    # on-time events reach 425 s: watermark 395 s closes [180,240), [240,300), [300,360);
    # [180,240) holds 10 events of the first run and 6 of the second
    closed = closed_windows(first + on_time, watermark_ms=START_MS + 395 * SECOND)
    assert {c.start_ms - START_MS for c in closed} == {s * 60 * SECOND for s in range(6)}
    assert sum(c.views for c in closed) == 40 + 18
    assert sum(c.views for c in closed if c.start_ms == START_MS + 180 * SECOND) == 16
    assert output(bootstrap, sink) == closed
    # what Spark's producer compressed is stored so (Strom keeps batches as produced)
    assert stored_codecs(shared_broker.data_dir, source) == {"lz4"}
    assert stored_codecs(shared_broker.data_dir, sink) == {"zstd"}


def test_restart_from_checkpoint_loses_and_repeats_nothing(
    spark: SparkSession, strom_broker: BrokerProcess, tmp_path: Path
) -> None:
    """A continuous query is stopped after it has processed its input; the broker restarts;
    more events come, among them views for a window still open at the stop; the job started
    again on the same checkpoint reads exactly the new events and finishes that window with
    the counts from before the stop (kept in the checkpoint's state) plus the new ones."""
    from examples.pageviews.stream import start_query

    bootstrap = strom_broker.bootstrap
    source, sink = topic_name("spark-restart-views"), topic_name("spark-restart-counts")
    create_topics(bootstrap, {source: 2, sink: 1})
    checkpoint = tmp_path / "checkpoint"

    first = page_views(40, step_ms=6 * SECOND, seed=3)  # 0 s .. 234 s: watermark 204 s
    produce(bootstrap, source, first, compression="gzip")
    query = start_query(
        spark, bootstrap=bootstrap, source=source, sink=sink, checkpoint=str(checkpoint),
        window="1 minute", watermark="30 seconds", available_now=False, interval="1 second",
    )  # fmt: skip
    try:
        # Wait for the batch that ran with the advanced watermark (it emits the closed
        # windows) to be reported: after it the query idles until new input arrives.
        watermark = iso_ms(START_MS + 204 * SECOND)
        wait_until(
            lambda: (
                query.exception() is not None
                or any(p.eventTime.get("watermark") == watermark for p in query.recentProgress)
            ),
            timeout=180,
            what="the continuous query to process its input and advance the watermark",
        )
        assert query.exception() is None, query.exception()
        assert input_rows(query.recentProgress) == 40
    finally:
        query.stop()
    before = output(bootstrap, sink)
    assert before == closed_windows(first, watermark_ms=START_MS + 204 * SECOND)

    strom_broker.restart()
    second = page_views(25, start_ms=START_MS + 185 * SECOND, step_ms=10 * SECOND, seed=4)
    produce(bootstrap, source, second, compression="gzip")
    progress = run_available_now(spark, bootstrap, source, sink, checkpoint)
    assert input_rows(progress) == 25  # the new events only: none lost, none read twice

    closed = closed_windows(first + second, watermark_ms=START_MS + 395 * SECOND)
    assert sum(c.views for c in closed) == 40 + 18
    assert sum(c.views for c in closed if c.start_ms == START_MS + 180 * SECOND) == 16
    assert output(bootstrap, sink) == closed


def test_the_readme_example(
    spark: SparkSession, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """`python -m examples.pageviews` against a broker: 600 views over ten minutes give nine
    closed windows; the batch job counts the first half of each partition."""
    from examples.pageviews.__main__ import run

    source, sink = topic_name("spark-demo-views"), topic_name("spark-demo-counts")
    counts, views = run(
        spark, shared_broker.bootstrap, tmp_path, source=source, sink=sink, count=600
    )
    events = page_views(600)
    assert counts == closed_windows(events, watermark_ms=START_MS + 569 * SECOND)
    assert len({c.start_ms for c in counts}) == 9
    assert sum(c.views for c in counts) == 540

    by_partition: dict[int, list[Delivered]] = {}
    for msg in read_all(shared_broker.bootstrap, source):
        partition, offset, value = msg.partition(), msg.offset(), msg.value()
        assert partition is not None
        assert offset is not None
        assert value is not None
        by_partition.setdefault(partition, []).append(
            Delivered(partition, offset, PageView.from_json(value))
        )
    first_halves = [d for ds in by_partition.values() for d in ds[: len(ds) // 2]]
    assert views == dict(Counter(d.event.page for d in first_halves))


def test_the_example_starts_its_own_broker(tmp_path: Path) -> None:
    """Without --bootstrap the example runs a throwaway `strom serve` on a free port."""
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined,unused-ignore]

    from examples.pageviews.__main__ import throwaway_broker

    with throwaway_broker(tmp_path) as bootstrap:
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert [b.id for b in metadata.brokers.values()] == [1]
        assert bootstrap.startswith("127.0.0.1:")
        assert bootstrap != "127.0.0.1:0"
