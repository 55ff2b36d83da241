"""Produce (key 0).

Behavior:
- Partitions are answered independently, in Kafka's order of checks:
  unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (Produce never
  creates topics); the v3+ record rules -> INVALID_RECORD (no batch, magic
  other than 2, more than one batch), UNSUPPORTED_COMPRESSION_TYPE (zstd
  before v7), CORRUPT_MESSAGE (nonsensical batch length); acks other than
  -1/0/1 -> INVALID_REQUIRED_ACKS for every remaining partition; internal
  topics -> INVALID_TOPIC_EXCEPTION; acks=-1 with an ISR smaller than
  min.insync.replicas -> NOT_ENOUGH_REPLICAS; then the log's checks
  (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD / INVALID_TIMESTAMP with
  record_errors and error_message, RECORD_LIST_TOO_LARGE,
  INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER) and disk failures
  (KAFKA_STORAGE_ERROR for that partition only). A retried idempotent batch
  gets its original offsets. See broker.data_append.
- Transactional batches: without a transactional id, or with one the principal
  may not WRITE, the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (a
  transactional id beside no transactional batch is not checked, as in Kafka);
  two producer ids is
  INVALID_PRODUCER_ID_MAPPING. With partition verification on (the default,
  and always for v12), a batch that would start its producer's transaction on
  a partition is first verified with the transaction coordinator (KIP-890,
  broker.data.txn_verify): a partition not in the transaction is
  INVALID_TXN_STATE ("Partition was not added to the transaction"), a retriable
  coordinator error NOT_ENOUGH_REPLICAS ("Unable to verify the partition has
  been added to the transaction. Underlying error: ...") so every client
  retries; with no coordinator installed the batch is appended unverified, as
  with verification off. The log then applies Kafka's transactional checks:
  INVALID_PRODUCER_EPOCH for an older epoch, INVALID_TXN_STATE for a
  non-transactional batch while the producer's transaction is open or an
  unverified start (storage.log.producer_state).
- acks=-1 on a partition with more than one replica: the answer waits until every ISR
  member holds the records (the high watermark passes them), then NONE, or
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas meanwhile,
  NOT_LEADER_OR_FOLLOWER if leadership moved, REQUEST_TIMED_OUT after timeout_ms (Kafka's
  produce purgatory); all partitions of the request wait together. acks=1 answers after
  the leader's append; single-replica partitions never wait.
- acks=0 gets no response; if any partition failed the connection is closed
  instead, as Kafka does, so the producer notices and refreshes metadata.
- Successful appends wake long-polling fetches on that partition.
- Pipelining: when the connection loop allows it (`RequestContext.may_defer`), a Produce that
  must wait for its replicas returns a `Deferred` once its records are appended, so the next
  Produce on the connection is appended while this one waits; the answers still go out in the
  requests' order. Kafka appends a connection's requests in the same order, one at a time.

Version notes: v3 baseline (transactional id, message format v2); v4
KAFKA_STORAGE_ERROR; v5 log_start_offset; v7 zstd; v8 record_errors and
error_message; v9 flexible; v10 tagged current_leader/node_endpoints (KIP-951:
a NOT_LEADER_OR_FOLLOWER partition names its current leader and epoch, and the
response the leaders' endpoints on the request's listener); v11/v12
transaction errors. Kafka advertises Produce v0-v12 in ApiVersions
(KAFKA-18659: librdkafka needs v0 listed) while refusing v0-v2 requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.broker_nodes import current_leader
from strom.broker.data.append import (
    AppendOutcome,
    append_partition,
    await_replication,
    first_batch,
)
from strom.broker.data.txn_verify import Refused, verify_partitions
from strom.broker.handlers.request import Deferred
from strom.broker.security.authorization import allowed
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.storage.log.producer_state import VerificationGuard
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records import (
    HEADER_SIZE,
    TRANSACTIONAL_MASK,
    BatchHeader,
    peek_attributes,
    peek_producer,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 12
ADVERTISED_MIN_VERSION = 0
"""What ApiVersions should list (KAFKA-18659); v0-v2 requests are still refused."""

VALID_ACKS = (-1, 0, 1)
REDIRECT_VERSION = 10
"""KIP-951's current_leader and node_endpoints."""
ALWAYS_VERIFY_VERSION = 12

TopicResponse = ProduceResponse.TopicProduceResponse


async def handle(
    broker: BrokerState, request: RequestContext, body: ProduceRequest
) -> ProduceResponse | Deferred | None:
    version = request.api_version
    acks = body.acks
    transactional = {
        (t.name, p.index): _producer(p.records)
        for t in body.topic_data
        for p in t.partition_data
        if _is_transactional(p.records)
    }
    whole_error = _request_error(body, transactional)
    if whole_error is None and transactional and body.transactional_id is not None and not allowed(
        broker, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):
        whole_error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    may_write = {
        t.name: allowed(broker, request, AclOperation.WRITE, ResourceType.TOPIC, t.name)
        for t in body.topic_data
    }
    verify = (
        version >= ALWAYS_VERIFY_VERSION
        or broker.effective_config.transaction_partition_verification_enable
    )
    verified: dict[tuple[str, int], VerificationGuard | Refused] = {}
    if verify and whole_error is None and transactional and body.transactional_id is not None:
        verified = await verify_partitions(
            broker,
            broker.txn_verification,
            body.transactional_id,
            version,
            _first_batches(body, transactional),
        )
    appended: list[tuple[str, list[AppendOutcome]]] = []
    for topic in body.topic_data:
        outcomes: list[AppendOutcome] = []
        for data in topic.partition_data:
            if whole_error is not None:
                outcomes.append(AppendOutcome(data.index, whole_error))
                continue
            if not may_write[topic.name]:
                outcomes.append(AppendOutcome(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            outcomes.append(
                await _one(
                    broker, request, topic.name, data, acks, verified.get((topic.name, data.index))
                )
            )
        appended.append((topic.name, outcomes))
    pending = [(name, o) for name, outcomes in appended for o in outcomes if o.awaiting]
    if not pending:
        return _answer(broker, request, body, appended)

    async def replicated() -> ProduceResponse | None:
        await await_replication(
            broker, broker.replication, broker.waiters, broker.min_isr, pending, body.timeout_ms
        )
        return _answer(broker, request, body, appended)

    if request.may_defer:  # appended: the connection may go on to its next Produce
        return Deferred(replicated)
    return await replicated()


def _answer(
    broker: BrokerState,
    request: RequestContext,
    body: ProduceRequest,
    appended: list[tuple[str, list[AppendOutcome]]],
) -> ProduceResponse | None:
    """The response once every partition is settled; None for acks=0, whose failures close
    the connection instead."""
    version, acks = request.api_version, body.acks
    responses = [
        TopicResponse(name, [o.response() for o in outcomes]) for name, outcomes in appended
    ]
    if acks == 0:
        failed = [
            f"{t.name}-{p.index}: {ErrorCode(p.error_code).name}"
            for t in responses
            for p in t.partition_responses
            if p.error_code != ErrorCode.NONE
        ]
        if failed:
            raise ProtocolError(
                "acks=0 produce failed, closing the connection: " + ", ".join(failed),
                ErrorCode(_first_error(responses)),
            )
        return None
    endpoints = _redirects(broker, request, responses) if version >= REDIRECT_VERSION else []
    return ProduceResponse(responses=responses, node_endpoints=endpoints)


def _redirects(
    broker: BrokerState, request: RequestContext, responses: list[TopicResponse]
) -> list[ProduceResponse.NodeEndpoint]:
    """KIP-951: each NOT_LEADER_OR_FOLLOWER partition names its current leader, and the
    response carries the leaders' endpoints on the request's listener."""
    image = broker.image
    endpoints: dict[int, ProduceResponse.NodeEndpoint] = {}
    for topic in responses:
        for p in topic.partition_responses:
            if p.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            leader, epoch, node = current_leader(
                broker, image, topic.name, p.index, request.listener
            )
            p.current_leader = ProduceResponse.LeaderIdAndEpoch(leader, epoch)
            if node is not None:
                endpoints[node.broker_id] = ProduceResponse.NodeEndpoint(*node[:4])
    return [endpoints[i] for i in sorted(endpoints)]


async def _one(
    broker: BrokerState,
    request: RequestContext,
    topic: str,
    data: ProduceRequest.PartitionProduceData,
    acks: int,
    verified: VerificationGuard | Refused | None,
) -> AppendOutcome:
    if broker.image.partition(topic, data.index) is None:
        return AppendOutcome(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    batch = first_batch(data.records, request.api_version)
    if isinstance(batch, ErrorCode):
        return AppendOutcome(data.index, batch)
    if isinstance(verified, Refused):
        return AppendOutcome(data.index, verified.error, error_message=verified.message)
    if acks not in VALID_ACKS:
        return AppendOutcome(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
    return await append_partition(
        broker,
        broker.replication,
        broker.waiters,
        broker.min_isr,
        topic,
        data.index,
        batch,
        acks,
        request.client_id,
        verified,
    )

def _first_batches(
    body: ProduceRequest, transactional: dict[tuple[str, int], tuple[int, int]]
) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(producer id, epoch, base sequence) of each transactional partition's first batch."""
    out = {}
    for topic in body.topic_data:
        for p in topic.partition_data:
            key = (topic.name, p.index)
            if key in transactional and isinstance(p.records, bytes | bytearray | memoryview):
                header = BatchHeader.parse(p.records)
                out[key] = (header.producer_id, header.producer_epoch, header.base_sequence)
    return out


def _request_error(
    body: ProduceRequest, transactional: dict[tuple[str, int], tuple[int, int]]
) -> ErrorCode | None:
    """An error Kafka gives every partition of the request, if any."""
    if not transactional:
        return None
    if body.transactional_id is None:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if len(set(transactional.values())) > 1:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    return None


def _is_transactional(records: object) -> bool:
    """Whether the first batch is transactional with a producer id (Kafka checks each batch;
    v3+ allows only one)."""
    if not isinstance(records, bytes | bytearray | memoryview) or len(records) < HEADER_SIZE:
        return False
    return bool(peek_attributes(records) & TRANSACTIONAL_MASK) and peek_producer(records)[0] >= 0


def _producer(records: object) -> tuple[int, int]:
    """(producer id, producer epoch) of the first batch."""
    if not isinstance(records, bytes | bytearray | memoryview) or len(records) < HEADER_SIZE:
        return -1, -1
    return peek_producer(records)


def _first_error(responses: list[TopicResponse]) -> int:
    for topic in responses:
        for partition in topic.partition_responses:
            if partition.error_code != ErrorCode.NONE:
                return partition.error_code
    return ErrorCode.NONE
