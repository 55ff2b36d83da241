"""Transactions on the data path of one broker, with raw requests: transactional produce, the
verification hook, markers (`write_txn_markers`), read_committed Fetch and ListOffsets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from strom.broker.core_state import BrokerCore
from strom.broker.data.txn_markers import write_txn_markers
from strom.broker.data.txn_verify import VerifyRequest
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.fetch import FetchResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.produce import ProduceResponse
from tests.broker.test_produce_helpers import (
    batch,
    create_topic,
    fetch_one,
    fetch_request,
    produce,
    produce_request,
    records_of,
    state_of,
)

pytestmark = pytest.mark.trio

PID = 4000


@pytest.fixture
async def broker(
    tmp_path: Path, broker_overrides: dict[str, str]
) -> AsyncIterator[EmbeddedBroker]:
    """These tests drive the data path with raw batches and markers, without a transaction
    coordinator: the broker's own verifier (the coordinator's) is taken out, as before one is
    installed; a test that needs one installs its fake."""
    async with open_broker(tmp_path / "data", broker_overrides) as running:
        state_of(running).txn_verification.verifier = None
        yield running


async def txn_produce(
    client: KafkaClient,
    values: list[bytes],
    seq: int,
    *,
    pid: int = PID,
    epoch: int = 0,
    version: int = 11,
) -> ProduceResponse.PartitionProduceResponse:
    records = batch(values, pid=pid, epoch=epoch, seq=seq, transactional=True)
    response = await client.request(
        produce_request("t", records, txn="app-1"), version, ProduceResponse
    )
    return response.responses[0].partition_responses[0]


async def end(
    state: BrokerState, commit: bool, *, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0
) -> ErrorCode:
    result = await write_txn_markers(
        state,
        state.replication,
        state.waiters,
        state.min_isr,
        [("t", 0)],
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        commit=commit,
    )
    return result[("t", 0)]


async def latest(client: KafkaClient, isolation: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                "t", [ListOffsetsRequest.ListOffsetsPartition(0, -1, -1)]
            )
        ],
    )
    response = await client.request(request, 9, ListOffsetsResponse)
    return response.topics[0].partitions[0].offset


async def test_read_committed_sees_only_committed_records(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    state = state_of(broker)
    await create_topic(broker, "t")
    assert (await txn_produce(client, [b"a1", b"a2"], 0)).error_code == ErrorCode.NONE
    assert (await produce(client, "t", batch([b"plain"]))).error_code == ErrorCode.NONE
    uncommitted = await fetch_one(client, "t", 0)
    committed = await fetch_one(client, "t", 0, isolation_level=1)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (3, 0)
    assert records_of(uncommitted.records) == [(0, b"a1"), (1, b"a2"), (2, b"plain")]
    assert committed.records in (b"", None)
    assert committed.aborted_transactions == []
    assert (await latest(client, 0), await latest(client, 1)) == (3, 0)

    assert await end(state, commit=False) == ErrorCode.NONE
    committed = await fetch_one(client, "t", 0, isolation_level=1)
    assert committed.last_stable_offset == committed.high_watermark == 4
    [aborted] = committed.aborted_transactions or []
    assert (aborted.producer_id, aborted.first_offset) == (PID, 0)
    assert await latest(client, 1) == 4

    assert (await txn_produce(client, [b"b1"], 2)).error_code == ErrorCode.NONE
    assert await end(state, commit=True) == ErrorCode.NONE
    tail = await fetch_one(client, "t", 4, isolation_level=1)
    assert [r for r in records_of(tail.records) if r[0] == 4] == [(4, b"b1")]  # then its marker
    assert tail.aborted_transactions == []
    assert (await fetch_one(client, "t", 0)).aborted_transactions is None


@pytest.mark.parametrize("version", [4, 5, 11, 12, 17])
async def test_every_fetch_version_carries_the_lso_and_aborted_list(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    await create_topic(broker, "t")
    await txn_produce(client, [b"x"], 0)
    await end(state_of(broker), commit=False)
    request = fetch_request("t", 0, isolation_level=1)
    if version >= 13:
        topic = state_of(broker).image.topic("t")
        assert topic is not None
        request.topics[0].topic_id = topic.topic_id
    response = await client.request(request, version, FetchResponse)
    [p] = response.responses[0].partitions
    assert p.last_stable_offset == 2
    assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions or []] == [(PID, 0)]


async def test_a_read_committed_consumer_waits_at_an_open_transaction(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    state = state_of(broker)
    await create_topic(broker, "t")
    await txn_produce(client, [b"x"], 0)
    request = fetch_request("t", 0, isolation_level=1, max_wait_ms=10_000, min_bytes=1)
    answers: list[FetchResponse] = []

    async def consume() -> None:
        answers.append(await client.request(request, 12, FetchResponse))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        assert not answers  # parked: nothing below the LSO yet
        assert await end(state, commit=True) == ErrorCode.NONE
    [p] = answers[0].responses[0].partitions
    assert records_of(p.records)[0] == (0, b"x")  # and its marker
    assert p.last_stable_offset == 2


async def test_marker_errors(broker: EmbeddedBroker, client: KafkaClient) -> None:
    state = state_of(broker)
    await create_topic(broker, "t")
    missing = await write_txn_markers(
        state,
        state.replication,
        state.waiters,
        state.min_isr,
        [("nope", 0), ("t", 5)],
        producer_id=PID,
        producer_epoch=0,
        coordinator_epoch=0,
        commit=True,
    )
    assert set(missing.values()) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    await txn_produce(client, [b"x"], 0, epoch=2)
    assert await end(state, commit=True, epoch=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert await end(state, commit=True, epoch=2, coordinator_epoch=3) == ErrorCode.NONE
    await txn_produce(client, [b"y"], 1, epoch=2)
    assert await end(state, commit=True, epoch=2, coordinator_epoch=2) == (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    # an unknown producer's marker is written (Kafka writes it too) and ends nothing
    assert await end(state, commit=False, pid=999, epoch=0) == ErrorCode.NONE
    assert (await fetch_one(client, "t", 0, isolation_level=1)).last_stable_offset == 2


async def test_markers_may_go_to_internal_topics(broker: EmbeddedBroker) -> None:
    state = state_of(broker)
    await create_topic(broker, "__consumer_offsets")
    result = await write_txn_markers(
        state,
        state.replication,
        state.waiters,
        state.min_isr,
        [("__consumer_offsets", 0)],
        producer_id=PID,
        producer_epoch=0,
        coordinator_epoch=0,
        commit=True,
    )
    assert result == {("__consumer_offsets", 0): ErrorCode.NONE}


async def test_non_transactional_batch_inside_a_transaction(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    await create_topic(broker, "t")
    await txn_produce(client, [b"x"], 0)
    plain = await produce(client, "t", batch([b"y"], pid=PID, epoch=0, seq=1), version=11)
    assert plain.error_code == ErrorCode.INVALID_TXN_STATE


class FakeCoordinator:
    def __init__(self, answer: ErrorCode) -> None:
        self.answer = answer
        self.asked: list[VerifyRequest] = []

    async def __call__(
        self, broker: BrokerCore, request: VerifyRequest
    ) -> dict[tuple[str, int], ErrorCode]:
        self.asked.append(request)
        return dict.fromkeys(request.partitions, self.answer)


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (ErrorCode.NONE, ErrorCode.NONE, None),
        (
            ErrorCode.INVALID_TXN_STATE,
            ErrorCode.INVALID_TXN_STATE,
            "Partition was not added to the transaction",
        ),
        (
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.NOT_ENOUGH_REPLICAS,
            "Unable to verify the partition has been added to the transaction. "
            "Underlying error: NOT_COORDINATOR",
        ),
        (ErrorCode.PRODUCER_FENCED, ErrorCode.PRODUCER_FENCED, None),
    ],
)
async def test_verification_hook(
    broker: EmbeddedBroker,
    client: KafkaClient,
    answer: ErrorCode,
    error: ErrorCode,
    message: str | None,
) -> None:
    state = state_of(broker)
    await create_topic(broker, "t")
    coordinator = FakeCoordinator(answer)
    state.txn_verification.verifier = coordinator
    p = await txn_produce(client, [b"x"], 0, version=12)
    assert (p.error_code, p.error_message) == (error, message)
    [asked] = coordinator.asked
    assert (asked.transactional_id, asked.producer_id, asked.partitions) == (
        "app-1",
        PID,
        [("t", 0)],
    )
    assert asked.produce_version == 12
    if answer == ErrorCode.NONE:
        # the transaction is ongoing here now: the next batch needs no verification
        assert (await txn_produce(client, [b"y"], 1, version=12)).error_code == ErrorCode.NONE
        assert len(coordinator.asked) == 1
        # after its marker, the next transaction's first batch is verified again
        await end(state, commit=True)
        await txn_produce(client, [b"z"], 2, version=12)
        assert len(coordinator.asked) == 2
    else:
        log = state.logs.get("t", 0)
        assert log is not None
        assert log.log_end_offset == 0  # nothing written


async def test_the_next_transaction_waits_for_the_previous_marker(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    """Transactions v2: EndTxn answers with the bumped epoch before the markers are written,
    so the next transaction's first batch (epoch + 1) can arrive before the previous
    transaction's marker. It is answered NOT_ENOUGH_REPLICAS (Kafka's retriable answer for
    CONCURRENT_TRANSACTIONS) without asking the coordinator, and lands after the marker in
    its own transaction (KAFKA-18575)."""
    state = state_of(broker)
    await create_topic(broker, "t")
    coordinator = FakeCoordinator(ErrorCode.NONE)
    state.txn_verification.verifier = coordinator
    assert (await txn_produce(client, [b"aborted"], 0, version=12)).error_code == ErrorCode.NONE
    early = await txn_produce(client, [b"next"], 0, epoch=1, version=12)
    assert (early.error_code, early.error_message) == (
        ErrorCode.NOT_ENOUGH_REPLICAS,
        "Unable to verify the partition has been added to the transaction. "
        "Underlying error: CONCURRENT_TRANSACTIONS",
    )
    assert len(coordinator.asked) == 1
    await end(state, commit=False, epoch=1)
    assert (await txn_produce(client, [b"next"], 0, epoch=1, version=12)).error_code == 0
    assert len(coordinator.asked) == 2
    assert await end(state, commit=True, epoch=2) == ErrorCode.NONE
    committed = await fetch_one(client, "t", 0, isolation_level=1)
    assert committed.last_stable_offset == 4  # aborted 0, its marker 1, next 2, its marker 3
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions or []] == [
        (PID, 0)
    ]
    assert (2, b"next") in records_of(committed.records)


async def test_verification_is_skipped_when_disabled(tmp_path: object) -> None:
    from pathlib import Path

    from strom.broker.testing.embedded import open_broker

    assert isinstance(tmp_path, Path)
    async with open_broker(
        tmp_path, {"transaction.partition.verification.enable": "false"}
    ) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        state = state_of(broker)
        await create_topic(broker, "t")
        coordinator = FakeCoordinator(ErrorCode.INVALID_TXN_STATE)
        state.txn_verification.verifier = coordinator
        assert (await txn_produce(client, [b"x"], 0, version=11)).error_code == ErrorCode.NONE
        assert not coordinator.asked
        # Produce v12 is always verified (KIP-890 part 2 clients)
        p = await txn_produce(client, [b"y"], 0, pid=PID + 1, version=12)
        assert p.error_code == ErrorCode.INVALID_TXN_STATE
        await client.aclose()
