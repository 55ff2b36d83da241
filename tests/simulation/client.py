"""The simulation's Kafka clients: what its workload sends, written as Kafka's clients behave.

They speak the real protocol over the simulated network (`strom.broker.testing.client`'s
`KafkaClient` over a `SimStream`), one request at a time per connection, and follow Kafka's
client rules where the checks depend on them:

- **Metadata** is refreshed after any error that says it is stale; requests go to the leader
  the last Metadata named, with its leader epoch (KIP-320), and fail over to other brokers.
- **Idempotent producer** (acks=all): a producer id and epoch from InitProducerId; per
  partition, sequence numbers from 0, one batch in flight; a retriable error or a lost
  connection sends the *same* batch again with the same sequence, so the broker must
  recognise it (the duplicates a real network makes). A batch that got no answer within the
  delivery timeout is *indeterminate* (it may or may not be in the log) and the producer
  starts afresh under a new producer id, as Kafka's clients do after a fatal sequence error.
- **Transactional producer** (transactions v1): FindCoordinator, InitProducerId,
  AddPartitionsToTxn, Produce, AddOffsetsToTxn and TxnOffsetCommit, EndTxn; a fenced or
  failed producer initialises again (which aborts what it had open).
- **Readers** fetch from the leader with the leader epoch; read_committed readers drop the
  records of the aborted transactions the answer lists, as Kafka's consumers do.

Every outcome goes to the `History` (`checker.py`), which judges the run.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from strom.broker import runtime
from strom.broker.testing.client import KafkaClient
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message
from strom.wire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from strom.wire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.end_txn import EndTxnRequest, EndTxnResponse
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from strom.wire.records import Record, build_batch, decode_batch, iter_batches
from tests.simulation.checker import History

R = TypeVar("R", bound=Message)

REQUEST_TIMEOUT = 10.0
"""Kafka's request.timeout.ms is 30 s; shorter here, so retries happen within a run."""
RETRY_BACKOFF = 0.1
DELIVERY_TIMEOUT = 60.0
"""After this long without an answer a batch is indeterminate (Kafka: delivery.timeout.ms)."""
PRODUCE_TIMEOUT_MS = 5_000

RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
}
"""Errors after which a request is sent again (Kafka's RetriableException family, plus
UNKNOWN_SERVER_ERROR, which a broker answers while a storage fault lasts)."""

STALE_METADATA = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


class Unavailable(Exception):
    """No answer (connection refused, reset, closed, timed out): try again elsewhere."""


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class ClusterView:
    """One client's connections and its view of the cluster, from Metadata answers."""

    name: str
    bootstrap: list[tuple[str, int]]
    rng: random.Random
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    connections: dict[tuple[str, int], KafkaClient] = field(default_factory=dict)
    _correlation: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def _connect(self, address: tuple[str, int]) -> KafkaClient:
        client = self.connections.get(address)
        if client is not None:
            return client
        try:
            with trio.fail_after(REQUEST_TIMEOUT):
                stream = await runtime.current().network.connect(*address)
        except (OSError, trio.TooSlowError) as exc:
            raise Unavailable(f"{address}: {exc!r}") from exc
        client = self.connections[address] = KafkaClient(stream, self.name)
        return client

    async def _drop(self, address: tuple[str, int]) -> None:
        client = self.connections.pop(address, None)
        if client is not None:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(client.stream)

    async def request(
        self, address: tuple[str, int], body: Message, version: int, kind: type[R]
    ) -> R:
        """Send `body` to `address` and return the answer; Unavailable on any failure (the
        connection is then closed: Kafka's clients do the same on a timeout)."""
        client = await self._connect(address)
        try:
            with trio.fail_after(REQUEST_TIMEOUT):
                return await client.request(body, version, kind)
        except (
            trio.TooSlowError,
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            ProtocolError,
            OSError,
        ) as exc:
            await self._drop(address)
            raise Unavailable(f"{address}: {exc!r}") from exc

    async def to_node(self, node: int, body: Message, version: int, kind: type[R]) -> R:
        address = self.brokers.get(node)
        if address is None:
            raise Unavailable(f"node {node} is not known")
        return await self.request(address, body, version, kind)

    async def any_broker(self, body: Message, version: int, kind: type[R]) -> R:
        """Send to some broker (known ones first, then the bootstrap list)."""
        candidates = sorted(set(self.brokers.values()) | set(self.bootstrap))
        self.rng.shuffle(candidates)
        last: Exception | None = None
        for address in candidates:
            try:
                return await self.request(address, body, version, kind)
            except Unavailable as exc:
                last = exc
        raise Unavailable(f"no broker answered: {last}")

    async def refresh(self, topics: list[str] | None = None) -> None:
        body = MetadataRequest(
            topics=None
            if topics is None
            else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        answer = await self.any_broker(body, 12, MetadataResponse)
        if answer.brokers:
            self.brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        for topic in answer.topics:
            if topic.error_code != ErrorCode.NONE or topic.name is None:
                continue
            self.topic_ids[topic.name] = topic.topic_id
            for p in topic.partitions:
                self.partitions[(topic.name, p.partition_index)] = PartitionInfo(
                    p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes)
                )

    async def refresh_quietly(self, topics: list[str] | None = None) -> None:
        try:
            await self.refresh(topics)
        except Unavailable:
            await trio.sleep(RETRY_BACKOFF)

    def leader(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.partitions.get((topic, partition))
        return info if info is not None and info.leader >= 0 else None

    async def close(self) -> None:
        for address in sorted(self.connections):
            await self._drop(address)


async def retry(
    what: Callable[[], Awaitable[R]], until: float, view: ClusterView, topics: list[str]
) -> R | None:
    """`what()` until it answers, refreshing metadata in between; None past `until`."""
    while trio.current_time() < until:
        try:
            return await what()
        except Unavailable:
            await view.refresh_quietly(topics)
            await trio.sleep(RETRY_BACKOFF)
    return None


# --- admin ---------------------------------------------------------------------------------------


async def create_topic(
    view: ClusterView, name: str, partitions: int, replication: int, configs: dict[str, str]
) -> None:
    """CreateTopics until the topic exists (TOPIC_ALREADY_EXISTS after a lost answer is fine)."""
    Config = CreateTopicsRequest.CreatableTopicConfig
    body = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication,
                configs=[Config(k, v) for k, v in sorted(configs.items())],
            )
        ],
        timeout_ms=10_000,
    )
    while True:
        try:
            answer = await view.any_broker(body, 7, CreateTopicsResponse)
        except Unavailable:
            await trio.sleep(0.5)
            continue
        code = answer.topics[0].error_code
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            return
        await trio.sleep(0.5)


async def find_coordinator(view: ClusterView, key: str, key_type: int, until: float) -> int | None:
    """FindCoordinator (0: a group, 1: a transactional id) until it names one; None past
    `until`."""
    while trio.current_time() < until:
        try:
            answer = await view.any_broker(
                FindCoordinatorRequest(key=key, key_type=key_type), 3, FindCoordinatorResponse
            )
        except Unavailable:
            await trio.sleep(RETRY_BACKOFF)
            continue
        if answer.error_code == ErrorCode.NONE:
            view.brokers.setdefault(answer.node_id, (answer.host, answer.port))
            return answer.node_id
        await trio.sleep(RETRY_BACKOFF)
    return None


# --- producing ----------------------------------------------------------------------------------


@dataclass
class Batch:
    topic: str
    partition: int
    values: list[bytes]
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1
    transactional: bool = False

    def encode(self, timestamp: int) -> bytes:
        records = [Record(None, v, (), timestamp) for v in self.values]
        return bytes(
            build_batch(
                records,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.sequence,
                transactional=self.transactional,
            )
        )


class SequenceBroken(Exception):
    """The broker refused the producer's id, epoch or sequence: start again under a new one."""


async def send_batch(
    view: ClusterView,
    batch: Batch,
    deadline: float,
    *,
    transactional_id: str | None = None,
    version: int = 9,
) -> tuple[int, int] | None:
    """Produce `batch` (acks=all) until acknowledged: (base offset, attempts), or None when the
    deadline passed (indeterminate). SequenceBroken on a fatal producer error."""
    topic, partition = batch.topic, batch.partition
    data = batch.encode(runtime.wall_clock_ms())
    attempts = 0
    while trio.current_time() < deadline:
        info = view.leader(topic, partition)
        if info is None:
            await view.refresh_quietly([topic])
            await trio.sleep(RETRY_BACKOFF)
            continue
        body = ProduceRequest(
            transactional_id=transactional_id,
            acks=-1,
            timeout_ms=PRODUCE_TIMEOUT_MS,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(partition, data)],
                )
            ],
        )
        attempts += 1
        try:
            answer = await view.to_node(info.leader, body, version, ProduceResponse)
        except Unavailable:
            await view.refresh_quietly([topic])
            await trio.sleep(RETRY_BACKOFF)
            continue
        result = answer.responses[0].partition_responses[0]
        code = result.error_code
        if code == ErrorCode.NONE:
            return result.base_offset, attempts
        if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            return -1, attempts
        if code in RETRIABLE:
            if code in STALE_METADATA:
                await view.refresh_quietly([topic])
            await trio.sleep(RETRY_BACKOFF)
            continue
        raise SequenceBroken(ErrorCode(code).name)
    return None


class IdempotentProducer:
    """Sends unique values (`<name>-<n>`) in small batches to seeded partitions, one batch at a
    time, each retried with its sequence until acknowledged or indeterminate."""

    def __init__(
        self, name: str, view: ClusterView, topic: str, partitions: int, history: History,
        rng: random.Random,
    ) -> None:  # fmt: skip
        self.name = name
        self.view = view
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rng = rng
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[int, int] = {}
        self.sent = 0

    async def _init(self) -> None:
        while True:
            try:
                answer = await self.view.any_broker(
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1),
                    4,
                    InitProducerIdResponse,
                )
            except Unavailable:
                await trio.sleep(0.5)
                continue
            if answer.error_code == ErrorCode.NONE:
                self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
                self.sequences = {}
                self.history.note(f"{self.name}: producer id {self.producer_id}")
                return
            await trio.sleep(0.5)

    async def run(self, until: float, interval: Callable[[], float]) -> None:
        await self._init()
        while trio.current_time() < until:
            partition = self.rng.randrange(self.partitions)
            count = self.rng.randint(1, 4)
            values = [f"{self.name}-{self.sent + i}".encode() for i in range(count)]
            self.sent += count
            sequence = self.sequences.get(partition, 0)
            batch = Batch(
                self.topic, partition, values, self.producer_id, self.producer_epoch, sequence
            )
            self.history.sending(self.name, partition, values)
            try:
                outcome = await send_batch(
                    self.view, batch, trio.current_time() + DELIVERY_TIMEOUT
                )
            except SequenceBroken as exc:
                self.history.indeterminate(self.name, partition, values, str(exc))
                await self._init()
                continue
            if outcome is None:
                self.history.indeterminate(self.name, partition, values, "delivery timeout")
                await self._init()
                continue
            offset, attempts = outcome
            self.sequences[partition] = sequence + count
            self.history.acknowledged(self.name, partition, values, offset, attempts)
            await trio.sleep(interval())


# --- transactions -------------------------------------------------------------------------------


class TransactionalProducer:
    """Runs transactions over several partitions (and, now and then, a group's offsets), each
    committed or aborted as the seed says; records what was decided and acknowledged."""

    def __init__(
        self, name: str, view: ClusterView, topic: str, partitions: int, history: History,
        rng: random.Random, group: str,
    ) -> None:  # fmt: skip
        self.name = name
        self.txn_id = f"txn-{name}"
        self.view = view
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rng = rng
        self.group = group
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[int, int] = {}
        self.coordinator = -1
        self.count = 0

    async def _to_coordinator(self, body: Message, version: int, kind: type[R]) -> R:
        if self.coordinator < 0:
            found = await find_coordinator(self.view, self.txn_id, 1, trio.current_time() + REQUEST_TIMEOUT)
            if found is None:
                raise Unavailable(f"no coordinator for {self.txn_id}")
            self.coordinator = found
        try:
            return await self.view.to_node(self.coordinator, body, version, kind)
        except Unavailable:
            self.coordinator = -1
            raise

    async def _init(self, until: float) -> bool:
        while trio.current_time() < until:
            try:
                answer = await self._to_coordinator(
                    InitProducerIdRequest(transactional_id=self.txn_id, transaction_timeout_ms=30_000),
                    4,
                    InitProducerIdResponse,
                )
            except Unavailable:
                await trio.sleep(RETRY_BACKOFF)
                continue
            if answer.error_code == ErrorCode.NONE:
                self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
                self.sequences = {}
                self.history.note(
                    f"{self.name}: producer id {self.producer_id} epoch {self.producer_epoch}"
                )
                return True
            if answer.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.coordinator = -1
            await trio.sleep(RETRY_BACKOFF)
        return False

    async def _call(self, until: float, body: Message, version: int, kind: type[R], code_of: Callable[[R], int]) -> int | None:
        """Send to the coordinator until it answers with a non-retriable code (returned)."""
        while trio.current_time() < until:
            try:
                answer = await self._to_coordinator(body, version, kind)
            except Unavailable:
                await trio.sleep(RETRY_BACKOFF)
                continue
            code = code_of(answer)
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.coordinator = -1
            if code in RETRIABLE:
                await trio.sleep(RETRY_BACKOFF)
                continue
            return code
        return None

    async def run(self, until: float, interval: Callable[[], float]) -> None:
        if not await self._init(until):
            return
        while trio.current_time() < until:
            await self._transaction(until)
            await trio.sleep(interval())

    async def _transaction(self, until: float) -> None:
        self.count += 1
        txn = f"{self.name}.{self.count}"
        chosen = sorted(self.rng.sample(range(self.partitions), self.rng.randint(1, self.partitions)))
        commit = self.rng.random() < 0.7
        with_offsets = self.rng.random() < 0.3
        values = {p: [f"{txn}-{p}-{i}".encode() for i in range(self.rng.randint(1, 3))] for p in chosen}
        self.history.txn_begin(txn, dict(values.items()))
        deadline = trio.current_time() + DELIVERY_TIMEOUT
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.txn_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[Topic(self.topic, chosen)],
        )

        def add_code(answer: AddPartitionsToTxnResponse) -> int:
            codes = {r.partition_error_code for t in answer.results_by_topic_v3_and_below for r in t.results_by_partition}
            bad = codes - {ErrorCode.NONE}
            return max(bad, key=lambda c: c in RETRIABLE) if bad else ErrorCode.NONE

        code = await self._call(deadline, add, 3, AddPartitionsToTxnResponse, add_code)
        if code != ErrorCode.NONE:
            return await self._fail(txn, f"AddPartitionsToTxn: {_name(code)}", until)
        for partition in chosen:
            sequence = self.sequences.get(partition, 0)
            batch = Batch(self.topic, partition, values[partition], self.producer_id,
                          self.producer_epoch, sequence, transactional=True)  # fmt: skip
            try:
                outcome = await send_batch(self.view, batch, deadline, transactional_id=self.txn_id)
            except SequenceBroken as exc:
                return await self._fail(txn, f"Produce: {exc}", until)
            if outcome is None:
                return await self._fail(txn, "Produce: delivery timeout", until)
            self.sequences[partition] = sequence + len(values[partition])
            self.history.txn_written(txn, partition, outcome[0])
        if with_offsets:
            offsets = {p: self.rng.randrange(1, 1000) for p in chosen}
            add_offsets = AddOffsetsToTxnRequest(self.txn_id, self.producer_id, self.producer_epoch, self.group)
            code = await self._call(deadline, add_offsets, 3, AddOffsetsToTxnResponse, lambda a: a.error_code)
            if code != ErrorCode.NONE:
                return await self._fail(txn, f"AddOffsetsToTxn: {_name(code)}", until)
            group_coordinator = await find_coordinator(self.view, self.group, 0, deadline)
            if group_coordinator is None:
                return await self._fail(txn, "FindCoordinator: timed out", until)
            Part = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
            commit_offsets = TxnOffsetCommitRequest(
                transactional_id=self.txn_id, group_id=self.group, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, generation_id=-1, member_id="",
                topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                    self.topic, [Part(p, o) for p, o in sorted(offsets.items())])],
            )  # fmt: skip
            code = await _txn_offset_commit(self.view, group_coordinator, commit_offsets, deadline)
            if code != ErrorCode.NONE:
                return await self._fail(txn, f"TxnOffsetCommit: {_name(code)}", until)
            self.history.txn_offsets(txn, self.group, offsets)
        self.history.txn_ending(txn, commit)
        end = EndTxnRequest(self.txn_id, self.producer_id, self.producer_epoch, commit)
        code = await self._call(deadline, end, 3, EndTxnResponse, lambda a: a.error_code)
        if code == ErrorCode.NONE:
            self.history.txn_ended(txn, commit)
            return None
        return await self._fail(txn, f"EndTxn: {_name(code)}", until)

    async def _fail(self, txn: str, why: str, until: float) -> None:
        """The transaction's outcome is not known to this producer: initialise again (which
        aborts it unless its commit was already decided)."""
        self.history.txn_failed(txn, why)
        await self._init(until)


async def _txn_offset_commit(
    view: ClusterView, coordinator: int, body: TxnOffsetCommitRequest, deadline: float
) -> int | None:
    while trio.current_time() < deadline:
        try:
            answer = await view.to_node(coordinator, body, 3, TxnOffsetCommitResponse)
        except Unavailable:
            await trio.sleep(RETRY_BACKOFF)
            continue
        codes = {p.error_code for t in answer.topics for p in t.partitions}
        bad = codes - {ErrorCode.NONE}
        if not bad:
            return ErrorCode.NONE
        if bad <= RETRIABLE:
            await trio.sleep(RETRY_BACKOFF)
            continue
        return max(bad)
    return None


def _name(code: int | None) -> str:
    if code is None:
        return "timed out"
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# --- consuming ------------------------------------------------------------------------------------


@dataclass
class Fetched:
    offset: int
    value: bytes
    producer_id: int
    transactional: bool


async def fetch_once(
    view: ClusterView, topic: str, partition: int, offset: int, *, read_committed: bool,
    max_wait_ms: int = 500,
) -> tuple[list[Fetched], int, int] | int:  # fmt: skip
    """One Fetch from the leader: (records, next offset, high watermark), or an error code.
    read_committed: the records of the aborted transactions the answer lists are dropped."""
    info = view.leader(topic, partition)
    if info is None:
        return ErrorCode.LEADER_NOT_AVAILABLE
    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1 if read_committed else 0,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=partition,
                        current_leader_epoch=info.leader_epoch,
                        fetch_offset=offset,
                        partition_max_bytes=256 * 1024,
                    )
                ],
            )
        ],
    )
    try:
        answer = await view.to_node(info.leader, body, 12, FetchResponse)
    except Unavailable:
        return ErrorCode.NETWORK_EXCEPTION
    if answer.error_code != ErrorCode.NONE:
        return answer.error_code
    data = answer.responses[0].partitions[0]
    if data.error_code != ErrorCode.NONE:
        return data.error_code
    aborted = sorted((a.first_offset, a.producer_id) for a in data.aborted_transactions or [])
    records, next_offset = _records(data.records, offset, aborted if read_committed else None)
    return records, next_offset, data.high_watermark


def _records(
    raw: Any, offset: int, aborted: list[tuple[int, int]] | None
) -> tuple[list[Fetched], int]:
    out: list[Fetched] = []
    next_offset = offset
    if not raw:
        return out, next_offset
    data = bytes(raw)
    open_aborted: set[int] = set()
    pending = list(aborted or [])
    for header, view in iter_batches(data, allow_partial=True):
        while pending and pending[0][0] <= header.last_offset:
            open_aborted.add(pending.pop(0)[1])
        if header.is_control:
            open_aborted.discard(header.producer_id)
            next_offset = max(next_offset, header.next_offset)
            continue
        skip = aborted is not None and header.is_transactional and header.producer_id in open_aborted
        _, records = decode_batch(view, header)
        for record in records:
            if record.offset >= offset and not skip:
                out.append(Fetched(record.offset, bytes(record.value or b""), header.producer_id,
                                   header.is_transactional))  # fmt: skip
        next_offset = max(next_offset, header.next_offset)
    return out, next_offset


class Reader:
    """Reads every partition from offset 0 for the whole run, as a consumer assigned them all."""

    def __init__(
        self, name: str, view: ClusterView, topic: str, partitions: int, history: History,
        *, read_committed: bool,
    ) -> None:  # fmt: skip
        self.name = name
        self.view = view
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.read_committed = read_committed
        self.positions = dict.fromkeys(range(partitions), 0)

    async def run(self, until: float) -> None:
        async with trio.open_nursery() as nursery:
            for partition in range(self.partitions):
                nursery.start_soon(self._partition, partition, until)

    async def _partition(self, partition: int, until: float) -> None:
        while trio.current_time() < until:
            got = await fetch_once(
                self.view, self.topic, partition, self.positions[partition],
                read_committed=self.read_committed,
            )  # fmt: skip
            if isinstance(got, int):
                if got == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self.history.anomaly(
                        f"{self.name}: partition {partition} offset {self.positions[partition]} "
                        "out of range at the leader (read before, now gone?)"
                    )
                    await trio.sleep(1.0)
                await self.view.refresh_quietly([self.topic])
                await trio.sleep(RETRY_BACKOFF)
                continue
            records, next_offset, _hw = got
            self.history.read(self.name, partition, records, self.positions[partition], next_offset,
                              committed=self.read_committed)  # fmt: skip
            self.positions[partition] = next_offset


# --- group offsets ------------------------------------------------------------------------------


class OffsetCommitter:
    """Commits ever larger offsets for a group (as a consumer with no membership does, generation
    -1) and reads them back: a read may never show less than a commit acknowledged before it."""

    def __init__(
        self, name: str, view: ClusterView, topic: str, partitions: int, group: str,
        history: History, rng: random.Random,
    ) -> None:  # fmt: skip
        self.name = name
        self.view = view
        self.topic = topic
        self.partitions = partitions
        self.group = group
        self.history = history
        self.rng = rng
        self.next = dict.fromkeys(range(partitions), 0)
        self.coordinator = -1

    async def run(self, until: float, interval: Callable[[], float]) -> None:
        while trio.current_time() < until:
            if self.coordinator < 0:
                found = await find_coordinator(self.view, self.group, 0, until)
                if found is None:
                    return
                self.coordinator = found
            if self.rng.random() < 0.5:
                await self._commit()
            else:
                await self._fetch()
            await trio.sleep(interval())

    async def _commit(self) -> None:
        partition = self.rng.randrange(self.partitions)
        offset = self.next[partition] + self.rng.randint(1, 50)
        self.next[partition] = offset
        Part = OffsetCommitRequest.OffsetCommitRequestPartition
        body = OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(self.topic, [Part(partition, offset)])],
        )  # fmt: skip
        self.history.commit_sent(self.group, partition, offset)
        try:
            answer = await self.view.to_node(self.coordinator, body, 8, OffsetCommitResponse)
        except Unavailable:
            self.coordinator = -1
            return
        code = answer.topics[0].partitions[0].error_code
        if code == ErrorCode.NONE:
            self.history.commit_acknowledged(self.group, partition, offset)
        elif code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self.coordinator = -1

    async def _fetch(self) -> None:
        started = self.history.commit_mark(self.group)
        body = OffsetFetchRequest(
            group_id=self.group,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(self.topic, list(range(self.partitions)))],
            require_stable=True,
        )
        try:
            answer = await self.view.to_node(self.coordinator, body, 7, OffsetFetchResponse)
        except Unavailable:
            self.coordinator = -1
            return
        if answer.error_code != ErrorCode.NONE:
            if answer.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.coordinator = -1
            return
        for topic in answer.topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.NONE:
                    self.history.commit_read(self.group, p.partition_index, p.committed_offset, started)
