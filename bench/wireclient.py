"""A minimal Kafka client on Strom's own sans-IO codec, for load shapes librdkafka cannot make.

`bench/scaling.py` uses it for a thousand producer connections from one process (a
confluent-kafka producer per connection would be a thousand librdkafka instances), for
fetches timed one by one at chosen offsets, and to fill a log with big pre-built batches.
Blocking sockets (`WireClient`) and trio streams (`AsyncWireClient`); requests are pipelined
and answered in order, as Kafka answers them.
"""

from __future__ import annotations

import random
import socket
import time

import trio

from strom.wire.connection import ClientConnection, Closed, NeedData
from strom.wire.message import Message
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records.builder import build_batch
from strom.wire.records.record import Record

PRODUCE_VERSION = 9
FETCH_VERSION = 12  # the newest with topic names (13+ use topic ids)
LIST_OFFSETS_VERSION = 7
LATEST = -1


def record_batch(count: int, size: int, seed: int = 0) -> bytes:
    """One uncompressed RecordBatch of `count` random upper-case values of `size` bytes."""
    rng = random.Random(seed)
    values = [bytes(rng.choices(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=size)) for _ in range(64)]
    now = int(time.time() * 1000)
    return bytes(build_batch(Record(None, values[i & 63], timestamp=now) for i in range(count)))


def produce_request(topic: str, partition: int, batch: bytes, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=30_000,
        topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(partition, batch)]
        )],
    )  # fmt: skip


def produce_many(parts: list[tuple[str, int]], batch: bytes, acks: int = 1) -> ProduceRequest:
    """One Produce carrying `batch` for each (topic, partition) of `parts`, as the Java client
    sends one request per broker with every partition it has a batch for."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in parts:
        by_topic.setdefault(topic, []).append(partition)
    return ProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=30_000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(partition, batch) for partition in partitions
        ]) for topic, partitions in by_topic.items()],
    )  # fmt: skip


def fetch_request(topic: str, partition: int, offset: int, max_bytes: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes,
        )])],
    )  # fmt: skip


def list_offsets_request(topic: str, partition: int, timestamp: int = LATEST) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
        ])],
    )  # fmt: skip


def produce_error(response: Message) -> int:
    """The first non-zero partition error code of a ProduceResponse, else 0."""
    assert isinstance(response, ProduceResponse)
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code:
                return int(part.error_code)
    return 0


def fetched(response: Message) -> tuple[int, int, int]:
    """(error code, high watermark, records bytes) of a one-partition FetchResponse."""
    assert isinstance(response, FetchResponse)
    if response.error_code:
        return int(response.error_code), -1, 0
    part = response.responses[0].partitions[0]
    return int(part.error_code), int(part.high_watermark), len(part.records or b"")


def latest_offset(response: Message) -> tuple[int, int]:
    """(error code, offset) of a one-partition ListOffsetsResponse."""
    assert isinstance(response, ListOffsetsResponse)
    part = response.topics[0].partitions[0]
    return int(part.error_code), int(part.offset)


class WireClient:
    """One blocking connection: `send` pipelines, `receive` returns responses in order."""

    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id="strom-bench")

    def send(self, body: Message, version: int) -> None:
        self.sock.sendall(self.conn.send_request(body, version))

    def receive(self) -> Message:
        while True:
            event = self.conn.next_response()
            if isinstance(event, tuple):
                return event[1]
            if isinstance(event, Closed):
                raise ConnectionResetError("the broker closed the connection")
            assert isinstance(event, NeedData)
            self.conn.receive_data(self.sock.recv(1 << 20))

    def call(self, body: Message, version: int) -> Message:
        self.send(body, version)
        return self.receive()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncWireClient:
    """One trio connection, one request in flight at a time."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = ClientConnection(client_id="strom-bench")

    @classmethod
    async def connect(cls, bootstrap: str) -> AsyncWireClient:
        host, port = bootstrap.rsplit(":", 1)
        return cls(await trio.open_tcp_stream(host, int(port)))

    async def call(self, body: Message, version: int) -> Message:
        await self.stream.send_all(self.conn.send_request(body, version))
        while True:
            event = self.conn.next_response()
            if isinstance(event, tuple):
                return event[1]
            if isinstance(event, Closed):
                raise ConnectionResetError("the broker closed the connection")
            data = await self.stream.receive_some(1 << 20)
            self.conn.receive_data(data)

    async def aclose(self) -> None:
        await self.stream.aclose()
