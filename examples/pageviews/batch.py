"""The batch job: views per page over a fixed offset range of the page-view topic.

`--starting-offsets` and `--ending-offsets` take Spark's own forms: `earliest` / `latest`, or
JSON per partition such as `{"pageviews": {"0": 10, "1": -2}}` (-2 = earliest, -1 = latest).
`--starting-time` / `--ending-time` (ISO-8601) give the range by record timestamp instead
(the producer sets it to the event time): in each partition, from the first record at or after
the starting time to the first at or after the ending time. The range is fixed when the job
starts, so records produced meanwhile are not counted.
"""

from __future__ import annotations

import argparse
import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from examples.pageviews.events import parse_iso_ms
from examples.pageviews.session import start_session
from examples.pageviews.stream import parse_page_views


def offsets_json(topic: str, offsets: dict[int, int]) -> str:
    """Spark's per-partition offsets form for one topic."""
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


def count_views(
    spark: SparkSession,
    *,
    bootstrap: str,
    topic: str,
    starting: str = "earliest",
    ending: str = "latest",
    starting_ms: int | None = None,
    ending_ms: int | None = None,
) -> dict[str, int]:
    """Views per page over [starting, ending) of `topic`; a timestamp (milliseconds since the
    epoch), when given, stands for the offset it finds in each partition."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
    )
    if starting_ms is not None:
        reader = reader.option("startingTimestamp", str(starting_ms))
    if ending_ms is not None:
        reader = reader.option("endingTimestamp", str(ending_ms))
    raw = reader.load()
    rows = parse_page_views(raw).groupBy("page").agg(F.count("*").alias("views")).collect()
    return {row["page"]: row["views"] for row in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Count page views over an offset range.")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="pageviews")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--ending-offsets", default="latest")
    parser.add_argument("--starting-time", type=parse_iso_ms, help="e.g. 2026-01-01T00:05:00Z")
    parser.add_argument("--ending-time", type=parse_iso_ms)
    args = parser.parse_args(argv)
    spark = start_session("pageviews-batch")
    try:
        counts = count_views(
            spark, bootstrap=args.bootstrap, topic=args.topic,
            starting=args.starting_offsets, ending=args.ending_offsets,
            starting_ms=args.starting_time, ending_ms=args.ending_time,
        )  # fmt: skip
    finally:
        spark.stop()
    print(f"views per page in {args.topic}:")
    for page, views in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{views:6d}  {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
