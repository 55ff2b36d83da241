"""The services' side of the pipeline: create the topics and produce page-view events.

With a stock Kafka client (confluent-kafka): keyed by user, record timestamp = event time,
idempotent, acks=all. `python -m examples.pageviews.produce` sends a reproducible run of
events (`events.page_views`).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer

# documented names that the admin module's stubs do not re-export explicitly
from confluent_kafka.admin import (  # type: ignore[attr-defined,unused-ignore]
    AdminClient,
    NewTopic,
)

from examples.pageviews.events import START_MS, PageView, page_views

TIMEOUT = 30.0


@dataclass(frozen=True)
class Delivered:
    """An event and where the broker put it."""

    partition: int
    offset: int
    event: PageView


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create each topic with its partition count; one that already exists is left as it is."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=1) for name, n in topics.items()],
        operation_timeout=TIMEOUT,
    )
    for future in futures.values():
        try:
            future.result(TIMEOUT)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def produce(
    bootstrap: str, topic: str, events: Iterable[PageView], *, compression: str = "none"
) -> list[Delivered]:
    """Produce the events in order (idempotent, acks=all); return them as delivered."""
    delivered: list[Delivered] = []
    errors: list[KafkaError] = []

    def on_delivery(event: PageView, err: KafkaError | None, msg: Message) -> None:
        partition, offset = msg.partition(), msg.offset()
        if err is not None or partition is None or offset is None:
            errors.append(err or KafkaError(KafkaError.UNKNOWN))
            return
        delivered.append(Delivered(partition, offset, event))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": compression,
        }
    )
    for event in events:
        producer.produce(
            topic,
            event.to_json(),
            key=event.user.encode(),
            timestamp=event.ts_ms,
            on_delivery=functools.partial(on_delivery, event),
        )
        producer.poll(0)
    left = producer.flush(TIMEOUT)
    if errors or left:
        raise RuntimeError(f"produce to {topic}: {left} undelivered, errors {errors[:3]}")
    return delivered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Produce page-view events to a topic.")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="pageviews")
    parser.add_argument("--partitions", type=int, default=3, help="if the topic is created")
    parser.add_argument("--count", type=int, default=600)
    parser.add_argument("--start-ms", type=int, default=START_MS, help="first event time")
    parser.add_argument("--step-ms", type=int, default=1000, help="between event times")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--compression", default="none", help="none, gzip, snappy, lz4, zstd")
    args = parser.parse_args(argv)
    create_topics(args.bootstrap, {args.topic: args.partitions})
    events = page_views(args.count, start_ms=args.start_ms, step_ms=args.step_ms, seed=args.seed)
    delivered = produce(args.bootstrap, args.topic, events, compression=args.compression)
    print(f"produced {len(delivered)} page views to {args.topic}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
