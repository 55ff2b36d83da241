"""The streaming job: page views per page per event-time window, from one topic to another.

Reads the page-view topic with Spark's `kafka` source, parses the JSON values, counts views per
page in tumbling event-time windows with a watermark, and writes each window's counts to the
output topic with the `kafka` sink, once the watermark has passed the window (append mode):
key = page, value = `{"page", "window_start", "window_end", "views"}`.

Events later than the watermark (the latest event time seen, less `--watermark`) are dropped.
The checkpoint directory holds the offsets read and the open windows' counts: a job started
again on it carries on where it stopped, without losing or repeating input.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from examples.pageviews.session import start_session

EVENT_SCHEMA = StructType(
    [
        StructField("page", StringType()),
        StructField("user", StringType()),
        StructField("ts", TimestampType()),
    ]
)


def parse_page_views(raw: DataFrame) -> DataFrame:
    """Kafka records (from the `kafka` source) to page views; malformed values are dropped."""
    parsed = raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("v"))
    return parsed.select("v.*").where(F.col("page").isNotNull() & F.col("ts").isNotNull())


def windowed_counts(views: DataFrame, *, window: str, watermark: str) -> DataFrame:
    """Views per page per tumbling window, as Kafka records for the sink."""
    counts = (
        views.withWatermark("ts", watermark)
        .groupBy(F.window("ts", window).alias("window"), F.col("page"))
        .count()
    )
    value = F.to_json(
        F.struct(
            F.col("page"),
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            F.col("count").alias("views"),
        )
    )
    return counts.select(F.col("page").alias("key"), value.alias("value"))


def start_query(
    spark: SparkSession,
    *,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    window: str = "1 minute",
    watermark: str = "30 seconds",
    available_now: bool = True,
    interval: str = "2 seconds",
    compression: str = "none",
) -> StreamingQuery:
    """Start the job. `available_now`: read what is in the topic now, then stop; otherwise
    run a micro-batch every `interval` until stopped. `compression`: the sink's codec."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    out = windowed_counts(parse_page_views(raw), window=window, watermark=watermark)
    writer = (
        out.writeStream.format("kafka")
        .queryName(f"pageviews-{source}")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("kafka.compression.type", compression)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=interval)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Count page views per page per time window.")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--source-topic", default="pageviews")
    parser.add_argument("--sink-topic", default="pageview-counts")
    parser.add_argument("--checkpoint", default="checkpoints/pageviews", help="a directory")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="30 seconds")
    parser.add_argument("--compression", default="none", help="of the output records")
    parser.add_argument(
        "--continuous", action="store_true", help="keep running (Ctrl-C stops) instead of "
        "processing what the topic holds now and stopping",
    )  # fmt: skip
    args = parser.parse_args(argv)
    spark = start_session("pageviews-stream")
    try:
        query = start_query(
            spark, bootstrap=args.bootstrap, source=args.source_topic, sink=args.sink_topic,
            checkpoint=args.checkpoint, window=args.window, watermark=args.watermark,
            available_now=not args.continuous, compression=args.compression,
        )  # fmt: skip
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
