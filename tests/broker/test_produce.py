"""Produce: every version, acks, validation errors, idempotence, transactions, durability."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records import Codec
from tests.broker.test_produce_helpers import (
    alter_topic_config,
    batch,
    create_topic,
    fetch_one,
    produce,
    produce_request,
    records_of,
    state_of,
)

pytestmark = pytest.mark.trio


@pytest.mark.parametrize("version", range(3, 13))
async def test_every_version_appends(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    await create_topic(broker, "t")
    first = await produce(client, "t", batch([b"a", b"b"]), version=version)
    second = await produce(client, "t", batch([b"c"]), version=version)
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 2)
    assert second.log_append_time_ms == -1
    assert second.log_start_offset == (0 if version >= 5 else -1)
    data = await fetch_one(client, "t", 0)
    assert records_of(data.records) == [(0, b"a"), (1, b"b"), (2, b"c")]


@pytest.mark.parametrize("codec", list(Codec))
async def test_codecs_are_stored_as_sent(
    broker: EmbeddedBroker, client: KafkaClient, codec: Codec
) -> None:
    await create_topic(broker, "t")
    raw = batch([b"x" * 100, b"y" * 100], codec=codec)
    assert (await produce(client, "t", raw)).error_code == ErrorCode.NONE
    data = await fetch_one(client, "t", 0)
    assert bytes(data.records or b"")[12:] != b""
    # byte-identical apart from the broker-owned fields (base offset, leader epoch, crc unchanged)
    assert bytes(data.records or b"")[61:] == raw[61:]
    assert records_of(data.records) == [(0, b"x" * 100), (1, b"y" * 100)]


async def test_unknown_topic_is_not_created(client: KafkaClient, broker: EmbeddedBroker) -> None:
    p = await produce(client, "nope", batch())
    assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (p.base_offset, p.log_start_offset) == (-1, -1)
    assert state_of(broker).image.topic("nope") is None
    await create_topic(broker, "t")
    assert (await produce(client, "t", batch(), partition=5)).error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


async def test_invalid_acks(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    p = await produce(client, "t", batch(), acks=2)
    assert p.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    # unknown partitions keep their own error
    assert (await produce(client, "zz", batch(), acks=2)).error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


async def test_acks_zero_gets_no_response_but_appends(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t")
    await client.send_only(produce_request("t", batch([b"fire"]), acks=0), 9)
    # the next request on the same connection is answered; the data is there
    data = await fetch_one(client, "t", 0)
    assert records_of(data.records) == [(0, b"fire")]


async def test_acks_zero_failure_closes_the_connection(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await client.send_only(produce_request("missing", batch(), acks=0), 9)
    with pytest.raises((ProtocolError, trio.BrokenResourceError)):
        await fetch_one(client, "t", 0)


async def test_record_rules_of_v3_and_later(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    two = batch([b"a"]) + batch([b"b"])
    assert (await produce(client, "t", two)).error_code == ErrorCode.INVALID_RECORD
    assert (await produce(client, "t", b"")).error_code == ErrorCode.INVALID_RECORD
    assert (await produce(client, "t", None)).error_code == ErrorCode.INVALID_RECORD
    legacy = bytearray(batch([b"a"]))
    legacy[16] = 1
    assert (await produce(client, "t", bytes(legacy))).error_code == ErrorCode.INVALID_RECORD
    zstd = batch([b"z"], codec=Codec.ZSTD)
    assert (await produce(client, "t", zstd, version=6)).error_code == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )
    assert (await produce(client, "t", zstd, version=7)).error_code == ErrorCode.NONE
    # a trailing partial batch is dropped, as Kafka's batch iterator does
    p = await produce(client, "t", batch([b"ok"]) + b"\x00" * 10)
    assert (p.error_code, p.base_offset) == (ErrorCode.NONE, 1)


async def test_corrupt_and_inconsistent_batches(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t", configs={"max.message.bytes": "1000"})
    bad_crc = bytearray(batch([b"a"]))
    bad_crc[-1] ^= 0xFF
    assert (await produce(client, "t", bytes(bad_crc))).error_code == ErrorCode.CORRUPT_MESSAGE
    miscount = bytearray(batch([b"a", b"b"]))
    miscount[23:27] = (5).to_bytes(4, "big")  # lastOffsetDelta != recordCount - 1
    from strom.wire.records import compute_crc

    miscount[17:21] = compute_crc(miscount).to_bytes(4, "big")
    p = await produce(client, "t", bytes(miscount))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert p.log_start_offset == 0
    big = await produce(client, "t", batch([b"x" * 2000]))
    assert (big.error_code, big.log_start_offset) == (ErrorCode.MESSAGE_TOO_LARGE, -1)


async def test_timestamp_errors_carry_record_errors(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t", configs={"message.timestamp.after.max.ms": "1000"})
    p = await produce(client, "t", batch([b"a", b"b"], ts=2 * 10**13))
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in p.record_errors] == [0, 1]
    assert p.error_message
    v7 = await client.request(
        produce_request("t", batch([b"a"], ts=2 * 10**13)), 7, ProduceResponse
    )
    assert v7.responses[0].partition_responses[0].record_errors == []


async def test_log_append_time_topic(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    p = await produce(client, "lat", batch([b"a"], ts=1000))
    assert p.error_code == ErrorCode.NONE
    now = state_of(broker).clock()
    assert now - 10_000 < p.log_append_time_ms <= now
    data = await fetch_one(client, "lat", 0)
    from strom.wire.records.builder import decode_batch

    header, _records = decode_batch(memoryview(bytes(data.records or b"")))
    assert header.max_timestamp == p.log_append_time_ms
    assert header.timestamp_type.name == "LOG_APPEND_TIME"


async def test_log_append_time_set_by_incremental_alter_configs(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "later")
    assert (await produce(client, "later", batch(ts=1000))).log_append_time_ms == -1
    await alter_topic_config(broker, "later", "message.timestamp.type", "LogAppendTime")
    p = await produce(client, "later", batch(ts=1000))
    assert (p.error_code, p.base_offset) == (ErrorCode.NONE, 1)
    assert p.log_append_time_ms > 1000


async def test_min_insync_replicas(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t", configs={"min.insync.replicas": "2"})
    p = await produce(client, "t", batch(), acks=-1)
    assert p.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert (await produce(client, "t", batch(), acks=1)).error_code == ErrorCode.NONE


async def test_internal_topics_refuse_clients(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "__consumer_offsets")
    p = await produce(client, "__consumer_offsets", batch())
    assert p.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_idempotent_retry_and_errors(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    first = batch([b"a", b"b"], pid=7, epoch=0, seq=0)
    assert (await produce(client, "t", first)).base_offset == 0
    assert (await produce(client, "t", batch([b"c"], pid=7, epoch=0, seq=2))).base_offset == 2
    retry = await produce(client, "t", first)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 0)
    gap = await produce(client, "t", batch([b"d"], pid=7, epoch=0, seq=9))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert gap.log_start_offset == 0
    assert (await produce(client, "t", batch([b"e"], pid=7, epoch=1, seq=0))).error_code == 0
    old = await produce(client, "t", batch([b"f"], pid=7, epoch=0, seq=3))
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    data = await fetch_one(client, "t", 0)
    assert [v for _, v in records_of(data.records)] == [b"a", b"b", b"c", b"e"]


async def test_transactional_batches(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    txn = batch([b"t"], pid=3, epoch=0, seq=0, transactional=True)
    no_id = await client.request(produce_request("t", txn), 11, ProduceResponse)
    assert no_id.responses[0].partition_responses[0].error_code == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    # verified with the transaction coordinator: before any producer looked it up there is
    # no __transaction_state, so none (Kafka's NOT_ENOUGH_REPLICAS, which clients retry) ...
    response = await client.request(produce_request("t", txn, txn="tx"), 11, ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == (
        ErrorCode.NOT_ENOUGH_REPLICAS
    )
    # ... and once there is, it never heard of this producer
    state = state_of(broker)
    assert state.transactions is not None
    assert await state.transactions.ensure_topic() == ErrorCode.NONE
    response = await client.request(produce_request("t", txn, txn="tx"), 11, ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )


async def test_transactional_batches_without_verification(tmp_path: Path) -> None:
    overrides = {"transaction.partition.verification.enable": "false"}
    async with open_broker(tmp_path, overrides) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        await create_topic(broker, "t")
        txn = batch([b"t"], pid=3, epoch=0, seq=0, transactional=True)
        response = await client.request(produce_request("t", txn, txn="tx"), 11, ProduceResponse)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        # the open transaction holds the last stable offset at its first offset
        committed = await fetch_one(client, "t", 0, isolation_level=1)
        assert committed.last_stable_offset == 0
        assert committed.high_watermark == 1
        assert committed.aborted_transactions == []
        await client.aclose()


async def test_multiple_partitions_answer_independently(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t", partitions=2)
    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    ProduceRequest.PartitionProduceData(0, batch([b"a"])),
                    ProduceRequest.PartitionProduceData(1, b"junk"),
                    ProduceRequest.PartitionProduceData(9, batch()),
                ],
            )
        ],
    )
    response = await client.request(request, 12, ProduceResponse)
    codes = [p.error_code for p in response.responses[0].partition_responses]
    assert codes == [
        ErrorCode.NONE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]


async def test_flush_messages_one_fsyncs_before_the_ack(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "durable", configs={"flush.messages": "1"})
    log = state_of(broker).logs.get("durable", 0)
    assert log is not None
    for i in range(3):
        p = await produce(client, "durable", batch([b"%d" % i]))
        assert p.error_code == ErrorCode.NONE
        assert log.recovery_point == p.base_offset + 1


async def test_restart_keeps_offsets(tmp_path: Path) -> None:
    async with open_broker(tmp_path) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        await create_topic(broker, "t")
        for i in range(20):
            await produce(client, "t", batch([b"%d" % i]))
        await client.aclose()
    async with open_broker(tmp_path) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        p = await produce(client, "t", batch([b"after"]))
        assert p.base_offset == 20
        data = await fetch_one(client, "t", 19)
        assert records_of(data.records)[:2] == [(19, b"19"), (20, b"after")]
        await client.aclose()
