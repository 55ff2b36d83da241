"""Fetch: every version, limits (KIP-74), errors, epochs, long polling."""

from __future__ import annotations

import uuid

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.storage import ReadResult
from strom.wire.errors import ErrorCode
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.broker.test_produce_helpers import (
    batch,
    create_topic,
    fetch_one,
    fetch_request,
    produce,
    records_of,
    state_of,
    wait_for,
)

pytestmark = pytest.mark.trio


async def _topic_id(client: KafkaClient, name: str) -> uuid.UUID:
    response = await client.request(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]),
        12,
        MetadataResponse,
    )
    return response.topics[0].topic_id


@pytest.mark.parametrize("version", range(4, 18))
async def test_every_version_reads(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    await create_topic(broker, "t")
    await produce(client, "t", batch([b"a", b"b"]))
    request = fetch_request("t", 0)
    if version >= 13:
        request.topics[0].topic_id = await _topic_id(client, "t")
    response = await client.request(request, version, FetchResponse)
    [topic] = response.responses
    [p] = topic.partitions
    assert p.error_code == ErrorCode.NONE
    assert records_of(p.records) == [(0, b"a"), (1, b"b")]
    assert p.high_watermark == 2
    assert p.last_stable_offset == 2
    assert p.log_start_offset == (0 if version >= 5 else -1)
    assert p.aborted_transactions is None
    assert p.preferred_read_replica == -1
    if version >= 13:
        assert topic.topic_id == request.topics[0].topic_id
    else:
        assert topic.topic == "t"


async def test_read_committed_gets_empty_aborted_list(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t")
    await produce(client, "t", batch())
    p = await fetch_one(client, "t", 0, isolation_level=1)
    assert p.aborted_transactions == []
    assert records_of(p.records) == [(0, b"v")]


async def test_offsets_out_of_range(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    await produce(client, "t", batch())
    p = await fetch_one(client, "t", 5)
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1)
    assert (await fetch_one(client, "t", -1)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at_end = await fetch_one(client, "t", 1)
    assert (at_end.error_code, at_end.records, at_end.high_watermark) == (ErrorCode.NONE, b"", 1)


async def test_unknown_topics_and_ids(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    await produce(client, "t", batch())
    request = fetch_request("nope", 0)
    request.topics.insert(0, fetch_request("t", 0, partition=3).topics[0])
    request.topics.append(fetch_request("t", 0).topics[0])
    response = await client.request(request, 12, FetchResponse)
    # readable partitions first, then the unknown ones, as Kafka orders them
    got = [
        (t.topic, p.partition_index, p.error_code) for t in response.responses for p in t.partitions
    ]
    assert got == [
        ("t", 0, ErrorCode.NONE),
        ("t", 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    by_id = fetch_request("", 0)
    by_id.topics[0].topic_id = uuid.uuid4()
    response = await client.request(by_id, 13, FetchResponse)
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_leader_epoch_fencing(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    epoch = state_of(broker).image.partition("t", 0).leader_epoch  # type: ignore[union-attr]
    request = fetch_request("t", 0)
    for given, expected in [
        (epoch, ErrorCode.NONE),
        (epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (-1, ErrorCode.NONE),
    ]:
        request.topics[0].partitions[0].current_leader_epoch = given
        response = await client.request(request, 12, FetchResponse)
        assert response.responses[0].partitions[0].error_code == expected
    if epoch > 0:
        request.topics[0].partitions[0].current_leader_epoch = epoch - 1
        response = await client.request(request, 12, FetchResponse)
        assert response.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH


async def test_diverging_epoch(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    await produce(client, "t", batch([b"a", b"b"]))
    epoch = state_of(broker).image.partition("t", 0).leader_epoch  # type: ignore[union-attr]
    request = fetch_request("t", 5)
    request.topics[0].partitions[0].last_fetched_epoch = epoch
    p = (await client.request(request, 12, FetchResponse)).responses[0].partitions[0]
    assert p.error_code == ErrorCode.NONE
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (epoch, 2)
    assert p.records == b""
    # a consistent position reads normally
    request.topics[0].partitions[0].fetch_offset = 1
    p = (await client.request(request, 12, FetchResponse)).responses[0].partitions[0]
    assert p.diverging_epoch.epoch == -1
    assert records_of(p.records) == [(0, b"a"), (1, b"b")]  # whole batches, as Kafka
    # an epoch newer than any known cannot be placed: Kafka answers OFFSET_OUT_OF_RANGE
    request.topics[0].partitions[0].last_fetched_epoch = epoch + 5
    p = (await client.request(request, 12, FetchResponse)).responses[0].partitions[0]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_byte_limits_and_first_batch_rule(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "a")
    await create_topic(broker, "b")
    big = batch([b"x" * 5000])
    for _ in range(3):
        await produce(client, "a", big)
        await produce(client, "b", big)
    # partition_max_bytes smaller than one batch: the first partition still gets its first batch
    request = fetch_request("a", 0, partition_max_bytes=100, max_bytes=100)
    request.topics.append(fetch_request("b", 0, partition_max_bytes=100).topics[0])
    response = await client.request(request, 12, FetchResponse)
    a, b = (t.partitions[0] for t in response.responses)
    assert [o for o, _ in records_of(a.records)] == [0]
    assert b.records == b""  # only until the first non-empty partition
    # max_bytes bounds the total
    request = fetch_request("a", 0, max_bytes=len(big) * 2, partition_max_bytes=10**6)
    request.topics.append(fetch_request("b", 0, partition_max_bytes=10**6).topics[0])
    response = await client.request(request, 12, FetchResponse)
    a, b = (t.partitions[0] for t in response.responses)
    assert len(records_of(a.records)) == 2
    assert b.records == b""


LONG_WAIT_MS = 600_000
"""A max_wait no test outlives: a fetch that returns at all was answered early, not timed out."""
GENEROUS = 60.0
"""An upper bound for work that takes milliseconds, safe on a loaded shared machine."""


async def test_long_poll_wakes_on_produce_from_another_connection(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t")
    other = await KafkaClient.connect(broker.bootstrap)
    result: list[FetchResponse.PartitionData] = []

    async def poll() -> None:
        result.append(await fetch_one(client, "t", 0, max_wait_ms=LONG_WAIT_MS, min_bytes=1))

    with trio.fail_after(GENEROUS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await wait_for(
                lambda: state_of(broker).waiters.parked() == 1, "the fetch to park"
            )
            # the parked fetch does not hold up another connection
            metadata = await other.request(MetadataRequest(topics=None), 12, MetadataResponse)
            assert metadata.cluster_id
            assert not result
            assert state_of(broker).waiters.parked() == 1
            await produce(other, "t", batch([b"wake"]))
    assert records_of(result[0].records) == [(0, b"wake")]
    assert state_of(broker).waiters.parked() == 0
    await other.aclose()


async def test_long_poll_times_out_empty(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    started = trio.current_time()  # the broker's clock too: it runs in this trio run
    with trio.fail_after(GENEROUS):
        p = await fetch_one(client, "t", 0, max_wait_ms=300, min_bytes=1)
    assert trio.current_time() - started >= 0.3
    assert p.records == b""


async def test_long_poll_waits_for_min_bytes(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    other = await KafkaClient.connect(broker.bootstrap)
    result: list[FetchResponse.PartitionData] = []

    async def poll() -> None:
        result.append(await fetch_one(client, "t", 0, max_wait_ms=5000, min_bytes=300))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        waiters = state_of(broker).waiters
        await wait_for(lambda: waiters.parked() == 1, "the fetch to park")
        await produce(other, "t", batch([b"small"]))
        # woken by the small batch, it re-reads, finds too few bytes and parks again
        await wait_for(lambda: waiters.parked() == 1, "the fetch to park again")
        assert not result  # 1 small batch is below min_bytes
        await produce(other, "t", batch([b"y" * 400]))
    assert len(records_of(result[0].records)) == 2
    await other.aclose()


async def test_no_readable_partition_answers_at_once(client: KafkaClient) -> None:
    with trio.fail_after(GENEROUS):
        response = await client.request(
            fetch_request("missing", 0, max_wait_ms=LONG_WAIT_MS, min_bytes=1), 12, FetchResponse
        )
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_reads_survive_a_failed_disk(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(broker, "t", partitions=2)
    await produce(client, "t", batch([b"before"]))
    log = state_of(broker).logs.get("t", 0)
    assert log is not None
    segment = log._segments[-1]

    def disk_full(*_args: object, **_kw: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment, "append", disk_full)
    p = await produce(client, "t", batch([b"lost"]))
    assert p.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    # that partition stays offline for appends, the other one works, reads keep working
    assert (await produce(client, "t", batch([b"again"]))).error_code == (
        ErrorCode.KAFKA_STORAGE_ERROR
    )
    assert (await produce(client, "t", batch([b"other"]), partition=1)).error_code == 0
    assert records_of((await fetch_one(client, "t", 0)).records) == [(0, b"before")]


def _io_error(*_args: object, **_kw: object) -> None:
    raise OSError(5, "Input/output error")


@pytest.mark.parametrize(("version", "expected"), [
    (12, ErrorCode.KAFKA_STORAGE_ERROR),
    (5, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # clients before v6 do not retry storage errors
])  # fmt: skip
async def test_a_failed_segment_read_is_a_storage_error(
    broker: EmbeddedBroker,
    client: KafkaClient,
    monkeypatch: pytest.MonkeyPatch,
    version: int,
    expected: ErrorCode,
) -> None:
    """An OSError locating or reading the records fails that partition alone, as Kafka does."""
    await create_topic(broker, "t", partitions=2)
    await produce(client, "t", batch([b"zero"]))
    await produce(client, "t", batch([b"one"]), partition=1)
    log = state_of(broker).logs.get("t", 0)
    assert log is not None
    monkeypatch.setattr(log, "read", _io_error)
    request = fetch_request("t", 0)
    request.topics[0].partitions.append(fetch_request("t", 0, partition=1).topics[0].partitions[0])
    response = await client.request(request, version, FetchResponse)
    failed, fine = response.responses[0].partitions
    assert (failed.error_code, failed.records) == (expected, b"")
    assert fine.error_code == ErrorCode.NONE
    assert records_of(fine.records) == [(0, b"one")]


async def test_a_failed_copy_of_the_records_is_a_storage_error(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read found the records but copying them from the segment fails (EIO on pread)."""
    await create_topic(broker, "t")
    await produce(client, "t", batch([b"zero"]))
    monkeypatch.setattr(ReadResult, "read_bytes", _io_error)
    p = await fetch_one(client, "t", 0)
    assert p.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (p.high_watermark, p.log_start_offset, p.records) == (-1, -1, b"")
    monkeypatch.undo()
    assert records_of((await fetch_one(client, "t", 0)).records) == [(0, b"zero")]


async def test_request_with_zero_partitions(client: KafkaClient) -> None:
    response = await client.request(FetchRequest(max_wait_ms=1000, min_bytes=1), 12, FetchResponse)
    assert response.responses == []


async def test_large_response_arrives_whole(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "big")
    values = [bytes([i]) * 600_000 for i in range(3)]
    for value in values:
        await produce(client, "big", batch([value]))
    p = await fetch_one(client, "big", 0, partition_max_bytes=10 * 1024 * 1024)
    assert [v for _, v in records_of(p.records)] == values


async def test_aborted_transactions_of_error_partitions(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    """Kafka: [] for partitions it refuses before reading, null for read errors (differential)."""
    await create_topic(broker, "t")
    await produce(client, "t", batch())
    unknown_partition = await fetch_one(client, "t", 0, partition=3)
    assert unknown_partition.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert unknown_partition.aborted_transactions == []
    unknown_topic = await fetch_one(client, "nope", 0)
    assert unknown_topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert unknown_topic.aborted_transactions == []
    out_of_range = await fetch_one(client, "t", 5)
    assert out_of_range.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert out_of_range.aborted_transactions is None
