"""A dashboard's side of the pipeline: read the streaming job's counts back.

With a stock Kafka client (confluent-kafka), assign-only: every record of the counts topic up
to its high watermarks. `python -m examples.pageviews.readback` prints them as a table.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from examples.pageviews.events import iso_ms, parse_iso_ms

TIMEOUT = 30.0


@dataclass(frozen=True, order=True)
class WindowCount:
    """One output record of the streaming job: views of `page` in [start, end)."""

    start_ms: int
    end_ms: int
    page: str
    views: int


def read_all(bootstrap: str, topic: str) -> list[Message]:
    """Every record of the topic, partition by partition, up to the high watermarks seen now."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pageviews-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        out: list[Message] = []
        for partition in sorted(metadata.partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=TIMEOUT
            )
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            got: list[Message] = []
            while len(got) < high - low:
                msg = consumer.poll(TIMEOUT)
                if msg is None:
                    raise TimeoutError(f"{topic}-{partition}: {len(got)} of {high - low} records")
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                got.append(msg)
            out += got
        return out
    finally:
        consumer.close()


def window_counts(messages: Sequence[Message]) -> list[WindowCount]:
    """The streaming job's output records, decoded (key = page, value = JSON)."""
    out: list[WindowCount] = []
    for msg in messages:
        value = msg.value()
        assert value is not None
        obj = json.loads(value)
        if msg.key() != obj["page"].encode():
            raise ValueError(f"record key {msg.key()!r} is not its page {obj['page']!r}")
        out.append(
            WindowCount(
                start_ms=parse_iso_ms(obj["window_start"]),
                end_ms=parse_iso_ms(obj["window_end"]),
                page=obj["page"],
                views=obj["views"],
            )
        )
    return out


def table(counts: Sequence[WindowCount]) -> str:
    """Views per page (columns) per window (rows)."""
    pages = sorted({c.page for c in counts})
    lines = ["window (UTC)      " + "".join(f"{p:>10}" for p in pages)]
    for start in sorted({c.start_ms for c in counts}):
        row = {c.page: c.views for c in counts if c.start_ms == start}
        lines.append(f"{iso_ms(start)[:16]}  " + "".join(f"{row.get(p, 0):>10}" for p in pages))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the streaming job's window counts.")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="pageview-counts")
    args = parser.parse_args(argv)
    print(table(sorted(window_counts(read_all(args.bootstrap, args.topic)))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
