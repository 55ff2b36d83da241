"""The request-path counters: batch record counts, histograms, elections, commit latency."""

from __future__ import annotations

import uuid

from strom.broker.metrics.recorder import (
    TIME_BUCKETS_MS,
    BrokerMetrics,
    CommitLatency,
    Elections,
    Histogram,
    _records_count,
)
from strom.coordinator.metadata.image import MetadataImage, PartitionImage, TopicImage
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records.builder import build_batch
from strom.wire.records.record import Record


def _batch(n: int) -> bytes:
    return bytes(build_batch([Record(None, b"v%d" % i) for i in range(n)]))


def test_records_count_reads_every_batch_header() -> None:
    assert _records_count(_batch(3) + _batch(5)) == 8
    assert _records_count(b"") == 0
    assert _records_count(_batch(2)[:40]) == 0  # a torn header is not counted


def test_histogram_buckets_are_cumulative_with_inf_last() -> None:
    histogram = Histogram()
    for value in (0.1, 0.7, 3, 99999):
        histogram.observe(value)
    buckets = histogram.cumulative()
    assert len(buckets) == len(TIME_BUCKETS_MS) + 1
    assert buckets[0] == ("0.5", 1)
    assert buckets[1] == ("1.0", 2)
    assert buckets[-2][1] == 3
    assert buckets[-1] == ("+Inf", 4)
    assert histogram.count == 4


def _produce(topic: str, *partitions: tuple[int, bytes]) -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                topic,
                [
                    ProduceRequest.PartitionProduceData(index, records)
                    for index, records in partitions
                ],
            )
        ],
    )


def _answer(topic: str, *codes: tuple[int, int]) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                topic,
                [ProduceResponse.PartitionProduceResponse(index, code) for index, code in codes],
            )
        ]
    )


def test_produce_counts_bytes_and_messages_of_appended_partitions_only() -> None:
    metrics = BrokerMetrics()
    ok, refused = _batch(4), _batch(2)
    request = _produce("orders", (0, ok), (1, refused))
    metrics.record_request(
        0, 9, request, _answer("orders", (0, 0), (1, 6)), 0.1, 2.0, lambda _: None
    )
    orders, total = metrics.topics["orders"], metrics.topics[""]
    assert (orders.bytes_in, orders.messages_in) == (len(ok), 4)
    assert (total.bytes_in, total.messages_in) == (len(ok), 4)
    assert orders.total_produce_requests == 1
    assert orders.failed_produce_requests == 1
    assert metrics.errors == {(0, 6): 1}
    assert metrics.requests == {(0, 9): 1}
    assert metrics.total_time[0].count == 1
    assert metrics.queue_time[0].sum == 0.1


def test_acks_zero_produce_counts_as_appended() -> None:
    metrics = BrokerMetrics()
    metrics.record_request(0, 9, _produce("t", (0, _batch(1))), None, 0, 0, lambda _: None)
    assert metrics.topics["t"].messages_in == 1


def test_forget_topics_drops_deleted_topics_but_keeps_the_totals() -> None:
    metrics = BrokerMetrics()
    metrics.record_request(0, 9, _produce("gone", (0, _batch(1))), None, 0, 0, lambda _: None)
    metrics.forget_topics(["other"])
    assert "gone" not in metrics.topics
    assert metrics.topics[""].messages_in == 1


def _image(leader: int, isr: tuple[int, ...], topic_id: uuid.UUID) -> MetadataImage:
    partition = PartitionImage(0, (1, 2, 3), isr, leader, 1, 1)
    topic = TopicImage("t", topic_id, {0: partition})
    return MetadataImage(topics_by_name={"t": topic}, topics_by_id={topic_id: topic})


class _Delta:
    def __init__(self, base: MetadataImage, topic_id: uuid.UUID) -> None:
        self.base = base
        self.changed_partitions = {(topic_id, 0)}


def test_elections_count_leader_moves_and_unclean_ones_on_the_active_controller() -> None:
    topic_id = uuid.uuid4()
    elections = Elections()
    before = _image(1, (1, 2), topic_id)
    elections.follow(_image(2, (2,), topic_id), _Delta(before, topic_id), active=True)
    assert (elections.leader, elections.unclean) == (1, 0)
    elections.follow(_image(3, (3,), topic_id), _Delta(before, topic_id), active=True)
    assert (elections.leader, elections.unclean) == (2, 1)
    elections.follow(_image(-1, (), topic_id), _Delta(before, topic_id), active=True)
    elections.follow(_image(2, (2,), topic_id), _Delta(before, topic_id), active=False)
    assert (elections.leader, elections.unclean) == (2, 1)


def test_commit_latency_window() -> None:
    latency = CommitLatency()
    assert latency.window() == (0.0, 0.0)
    latency.proposed(10)
    latency.proposed(12)
    latency.committed(11)  # only the first is committed
    average, maximum = latency.window()
    assert 0 <= average == maximum < 1000
    latency.committed(13)
    assert len(latency._done) == 2


def test_isr_changes_count_shrinks_and_expands() -> None:
    metrics = BrokerMetrics()
    metrics.isr_changed(3, 2)
    metrics.isr_changed(2, 3)
    metrics.isr_changed(3, 3)
    assert (metrics.isr_shrinks, metrics.isr_expands) == (1, 1)
