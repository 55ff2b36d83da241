"""A group member in its own process, so a test can kill it with SIGKILL.

    python -m compat_tests.groups.member CLIENT BOOTSTRAP GROUP TOPIC [key=value ...]

CLIENT is confluent, kafka-python or aiokafka. Prints one JSON object per line:
{"assigned": [...]} / {"revoked": [...]} on rebalances and {"consumed": [partition, offset]}
for each record *before* committing it, so a record printed but not committed is exactly
what at-least-once must deliver again. A consumer error, a commit failure other than
losing the partition to a rebalance, or a crash prints {"error": "..."}, which fails the
test (`ckgroup.ChildMember`). For confluent, extra key=value arguments are consumer
settings; `delay` slows consumption (seconds per record) for every client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import warnings
from typing import Any

SESSION_MS = 6000


REBALANCED = (
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "_ASSIGNMENT_LOST",
)
"""confluent-kafka commit errors that mean a rebalance took the partition (at-least-once)."""


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def confluent(
    bootstrap: str, group: str, topic: str, settings: dict[str, Any], delay: float
) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
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
        if msg is None:
            continue
        if msg.error():
            emit({"error": f"consumer error: {msg.error()}"})
            continue
        emit({"consumed": [msg.partition(), msg.offset()]})
        time.sleep(delay)
        try:
            consumer.commit(message=msg, asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].name() not in REBALANCED:
                emit({"error": f"commit failed: {exc.args[0]}"})


def kafka_python(bootstrap: str, group: str, topic: str, delay: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
        from kafka.errors import CommitFailedError, IllegalStateError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit({"revoked": sorted(tp.partition for tp in revoked)})

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"assigned": sorted(tp.partition for tp in assigned)})

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
        max_poll_records=1,
    )  # fmt: skip
    assert consumer.partitions_for_topic(topic)
    consumer.subscribe([topic], listener=Listener())
    while True:
        for tp, records in consumer.poll(timeout_ms=200).items():
            for r in records:
                emit({"consumed": [tp.partition, r.offset]})
                time.sleep(delay)
                with contextlib.suppress(CommitFailedError, IllegalStateError):  # rebalanced away
                    consumer.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})


def aiokafka(bootstrap: str, group: str, topic: str, delay: float) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import CommitFailedError, IllegalStateError
    from aiokafka.structs import OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            emit({"revoked": sorted(tp.partition for tp in revoked)})

        async def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"assigned": sorted(tp.partition for tp in assigned)})

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
        )  # fmt: skip
        consumer.subscribe([topic], listener=Listener())
        await consumer.start()
        while True:
            for tp, records in (await consumer.getmany(timeout_ms=200, max_records=1)).items():
                for r in records:
                    emit({"consumed": [tp.partition, r.offset]})
                    await asyncio.sleep(delay)
                    with contextlib.suppress(CommitFailedError, IllegalStateError):  # rebalanced
                        await consumer.commit({tp: OffsetAndMetadata(r.offset + 1, "")})

    asyncio.run(run())


def main(argv: list[str]) -> None:
    client, bootstrap, group, topic, *extra = argv
    settings: dict[str, Any] = dict(item.split("=", 1) for item in extra)
    delay = float(settings.pop("delay", "0"))
    try:
        if client == "confluent":
            confluent(bootstrap, group, topic, settings, delay)
        elif client == "kafka-python":
            kafka_python(bootstrap, group, topic, delay)
        else:
            aiokafka(bootstrap, group, topic, delay)
    except Exception as exc:
        emit({"error": f"{client} member crashed: {type(exc).__name__}: {exc}"})
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
