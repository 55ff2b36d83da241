"""read_committed Fetch and ListOffsets, Strom against Apache Kafka, answer by answer.

The same transactional history goes to a fresh topic on each broker (the interleaving of
compat_tests/confluent_kafka/test_read_committed.py: two transactional producers, commits,
aborts, plain records, one transaction left open), written by stock clients. Then the same raw
requests go to both: a read_committed Fetch from every offset of the log, one batch at a time
(partition_max_bytes 1: KIP-74 returns the first batch whole) and all at once, at Fetch v4 and
v12, and ListOffsets latest for both isolation levels. The answers must match field by field:
error, high watermark, last stable offset, log start, the aborted transactions (producer ids
renamed in order of appearance, as each broker allocates its own), and the offsets of the
batches returned.
"""

from __future__ import annotations

import trio

from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.test_read_committed import write_interleaved
from compat_tests.differential.conftest import Pair
from compat_tests.helpers import topic_name, wait_until
from strom.broker.testing.client import KafkaClient
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.records import iter_batches

Answer = tuple[object, ...]


async def _answers(bootstrap: str, topic: str, end: int) -> list[Answer]:
    client = await KafkaClient.connect(bootstrap)
    names: dict[int, int] = {}

    def name(pid: int) -> int:
        return names.setdefault(pid, len(names))

    out: list[Answer] = []
    try:
        for isolation in (0, 1):
            listing = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        topic, [ListOffsetsRequest.ListOffsetsPartition(0, -1, -1)]
                    )
                ],
            )
            listed = await client.request(listing, 7, ListOffsetsResponse)
            [found] = listed.topics[0].partitions
            out.append(("list_offsets", isolation, found.error_code, found.offset))
        for version in (4, 12):
            for max_bytes in (1, 1 << 20):
                for offset in range(end + 1):
                    request = FetchRequest(
                        max_wait_ms=0,
                        min_bytes=0,
                        max_bytes=1 << 20,
                        isolation_level=1,
                        topics=[
                            FetchRequest.FetchTopic(
                                topic=topic,
                                partitions=[
                                    FetchRequest.FetchPartition(
                                        partition=0, fetch_offset=offset,
                                        partition_max_bytes=max_bytes,
                                    )
                                ],
                            )
                        ],
                    )  # fmt: skip
                    response = await client.request(request, version, FetchResponse)
                    [p] = response.responses[0].partitions
                    batches = [
                        (h.base_offset, h.is_control, h.is_transactional,
                         name(h.producer_id) if h.producer_id >= 0 else -1)
                        for h, _ in iter_batches(bytes(p.records or b""), allow_partial=True)
                    ]  # fmt: skip
                    aborted = None
                    if p.aborted_transactions is not None:
                        aborted = [
                            (name(t.producer_id), t.first_offset) for t in p.aborted_transactions
                        ]
                    out.append((
                        "fetch", version, max_bytes, offset, p.error_code, p.high_watermark,
                        p.last_stable_offset, p.log_start_offset, aborted, batches,
                    ))  # fmt: skip
    finally:
        await client.aclose()
    return out


def _history(bootstrap: str) -> tuple[str, int]:
    """The history on a fresh topic; its log end. Each marker is waited for before the next
    write (Kafka writes markers after answering EndTxn), so both logs hold the same order."""
    topic = topic_name("diff-rc")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    consumer = ck.consumer(bootstrap, **{"isolation.level": "read_uncommitted"})

    def high() -> int:
        return int(ck.watermarks(consumer, topic, 0)[1])

    def marked(end: int) -> None:
        wait_until(lambda: high() >= end or None, timeout=30, what="the marker", interval=0.05)

    try:
        write_interleaved(bootstrap, topic, marked)
        return topic, high()
    finally:
        consumer.close()


def test_read_committed_answers_match(pair: Pair) -> None:
    kafka_topic, kafka_end = _history(pair.kafka.bootstrap)
    strom_topic, strom_end = _history(pair.strom.bootstrap)
    assert strom_end == kafka_end
    kafka = trio.run(_answers, pair.kafka.bootstrap, kafka_topic, kafka_end)
    strom = trio.run(_answers, pair.strom.bootstrap, strom_topic, strom_end)
    assert len(kafka) == len(strom)
    for k, s in zip(kafka, strom, strict=True):
        assert s == k
