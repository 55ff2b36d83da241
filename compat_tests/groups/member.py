"""A confluent-kafka group member in its own process, so a test can kill it with SIGKILL.

    python -m compat_tests.groups.member BOOTSTRAP GROUP TOPIC [key=value ...]

Prints one JSON object per line: {"assigned": [...]} after each rebalance and
{"consumed": [partition, offset]} for each record, *before* committing it (so a record
printed but not committed is exactly what at-least-once must deliver again). Extra
key=value arguments are consumer settings; `delay` slows consumption (seconds per record).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def main(argv: list[str]) -> None:
    bootstrap, group, topic, *extra = argv
    settings: dict[str, Any] = dict(item.split("=", 1) for item in extra)
    delay = float(settings.pop("delay", "0"))
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
            **settings,
        }
    )

    def assigned(c: Consumer, partitions: list[TopicPartition]) -> None:
        emit({"assigned": sorted(p.partition for p in partitions)})

    def revoked(c: Consumer, partitions: list[TopicPartition]) -> None:
        emit({"revoked": sorted(p.partition for p in partitions)})

    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    while True:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        emit({"consumed": [msg.partition(), msg.offset()]})
        time.sleep(delay)
        consumer.commit(message=msg, asynchronous=False)


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
