"""Helpers for the data-plane tests (topics, batches, produce/fetch shortcuts), and their checks."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import pytest
import trio

from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.create_topics import CreateTopicsRequest
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records import Codec, Record, build_batch, iter_batches
from strom.wire.records.builder import decode_batch

pytestmark = pytest.mark.trio

T0 = 1_700_000_000_000


def state_of(broker: EmbeddedBroker) -> BrokerState:
    state = broker.broker.state
    assert state is not None
    return state


async def create_topic(
    broker: EmbeddedBroker,
    name: str,
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
) -> None:
    """Create a topic through the controller (the CreateTopics handler is not ours)."""
    Config = CreateTopicsRequest.CreatableTopicConfig
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                configs=[Config(k, v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=10_000,
    )
    response = await state_of(broker).controller.create_topics(request, 7)
    assert response.topics[0].error_code == ErrorCode.NONE, response


async def alter_topic_config(broker: EmbeddedBroker, name: str, key: str, value: str) -> None:
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name=key, config_operation=0, value=value
                    )
                ],
            )
        ]
    )
    response = await state_of(broker).controller.incremental_alter_configs(request, 1)
    assert response.responses[0].error_code == ErrorCode.NONE, response


def batch(
    values: Sequence[bytes] = (b"v",),
    *,
    ts: int | None = None,
    codec: Codec = Codec.NONE,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
    keys: Sequence[bytes | None] | None = None,
) -> bytes:
    """One v2 batch as a producer sends it; record i has timestamp ts + i."""
    import time

    base = ts if ts is not None else time.time_ns() // 1_000_000
    keys = keys if keys is not None else [b"k%d" % i for i in range(len(values))]
    records = [
        Record(k, v, (), base + i) for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]
    return bytes(
        build_batch(
            records,
            codec=codec,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=transactional,
        )
    )


def produce_request(
    topic: str, records: bytes | None, partition: int = 0, acks: int = -1, txn: str | None = None
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=txn,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=partition, records=records)
                ],
            )
        ],
    )


async def produce(
    client: KafkaClient,
    topic: str,
    records: bytes | None,
    partition: int = 0,
    version: int = 12,
    acks: int = -1,
) -> ProduceResponse.PartitionProduceResponse:
    response = await client.request(
        produce_request(topic, records, partition, acks), version, ProduceResponse
    )
    [t] = response.responses
    [p] = t.partition_responses
    return p


def fetch_request(
    topic: str,
    offset: int,
    partition: int = 0,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
    isolation_level: int = 0,
) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
    )


async def fetch_one(
    client: KafkaClient, topic: str, offset: int, partition: int = 0, version: int = 12, **kw: int
) -> FetchResponse.PartitionData:
    response = await client.request(
        fetch_request(topic, offset, partition, **kw), version, FetchResponse
    )
    assert response.error_code == ErrorCode.NONE
    [t] = response.responses
    [p] = t.partitions
    return p


def records_of(data: bytes | bytearray | memoryview | None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in fetched bytes, decompressing as needed."""
    out: list[tuple[int, bytes | None]] = []
    for _header, raw in iter_batches(memoryview(bytes(data or b""))):
        header, records = decode_batch(raw)
        out.extend((header.base_offset + i, r.value) for i, r in enumerate(records))
    return out


async def test_batch_round_trips_through_decode() -> None:
    raw = batch([b"a", b"b"], codec=Codec.GZIP)
    assert records_of(raw) == [(0, b"a"), (1, b"b")]


async def test_create_topic_makes_logs(broker: EmbeddedBroker) -> None:
    await create_topic(broker, "helpers", partitions=2, configs={"segment.bytes": "1048576"})
    state = state_of(broker)
    assert state.logs.get("helpers", 1) is not None
    log = state.logs.get("helpers", 0)
    assert log is not None
    assert log.config.segment_bytes == 1048576


async def wait_for(condition: Callable[[], object], what: str, seconds: float = 10.0) -> None:
    """Poll `condition` until it holds, failing the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await trio.sleep(0.02)
