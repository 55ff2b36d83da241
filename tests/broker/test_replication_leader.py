"""The leader side of replication on one in-process node (`ReplicationManager`, the Fetch
handler's replica reads, Produce acks=all, AlterPartition through the node's controller).

Brokers 2 and 3 register with the node's controller but run nowhere; this test plays broker 2
by sending the Fetch requests a follower sends (with its log start offset, which DeleteRecords
on a replicated partition waits for). Partition 0 of "rep" is led here with
replicas [1, 2]; "single" has one replica, here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from strom.broker.data import fetch_read, follower_sessions
from strom.broker.data.fetch_read import PartitionRead
from strom.broker.data.txn_markers import write_txn_markers
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from strom.wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.produce import ProduceResponse
from tests.broker.cluster_helpers import (
    CLUSTER_OVERRIDES,
    create_placed,
    fence,
    register,
    state_of,
)
from tests.broker.test_produce_helpers import batch, fetch_request, produce, produce_request

pytestmark = pytest.mark.trio

TOPIC = "rep"
SINGLE = "single"


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {**CLUSTER_OVERRIDES, "replica.lag.time.max.ms": "1000"}


@pytest.fixture
async def cluster(broker: EmbeddedBroker) -> BrokerState:
    state = state_of(broker)
    await register(state, 2)
    await register(state, 3)
    await create_placed(state, TOPIC, [[1, 2]])
    await create_placed(state, SINGLE, [[1]])
    return state


def _epoch(state: BrokerState, broker_id: int) -> int:
    """The broker epoch `register` gave a fake broker (its registration in the image)."""
    registration = state.image.broker(broker_id)
    assert registration is not None
    return registration.epoch


def replica_fetch(
    state: BrokerState,
    offset: int,
    *,
    replica: int = 2,
    epoch: int = -1,
    last_fetched_epoch: int = -1,
    log_start: int = -1,
) -> FetchRequest:
    request = fetch_request(TOPIC, offset)
    topic = state.image.topic(TOPIC)
    assert topic is not None
    request.topics[0].topic_id = topic.topic_id
    request.replica_state = FetchRequest.ReplicaState(replica, epoch)
    request.topics[0].partitions[0].last_fetched_epoch = last_fetched_epoch
    request.topics[0].partitions[0].log_start_offset = log_start
    return request


async def fetch_one(client: KafkaClient, request: FetchRequest) -> FetchResponse.PartitionData:
    """Fetch v15 (replica_state) for a replica's request, v12 (topic names) for a consumer's."""
    version = 15 if request.replica_state.replica_id >= 0 else 12
    response = await client.request(request, version, FetchResponse)
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


async def test_acks_all_times_out_without_the_follower(
    cluster: BrokerState, client: KafkaClient
) -> None:
    request = produce_request(TOPIC, batch(), 0, acks=-1)
    request.timeout_ms = 50
    response = await client.request(request, 9, ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    log = cluster.logs.get(TOPIC, 0)
    assert log is not None
    assert (log.log_end_offset, log.high_watermark) == (1, 0)
    consumer = await fetch_one(client, fetch_request(TOPIC, 0))  # up to the high watermark
    assert (consumer.error_code, consumer.high_watermark) == (ErrorCode.NONE, 0)
    assert not consumer.records


async def test_a_single_replica_partition_commits_at_append(
    cluster: BrokerState, client: KafkaClient
) -> None:
    answer = await produce(client, SINGLE, batch(), acks=-1)
    assert answer.error_code == ErrorCode.NONE
    log = cluster.logs.get(SINGLE, 0)
    assert log is not None
    assert log.high_watermark == log.log_end_offset == 1
    assert cluster.replication.leaders.keys() == {(TOPIC, 0)}


async def test_replica_fetch_reads_to_the_log_end_and_moves_the_high_watermark(
    cluster: BrokerState, client: KafkaClient
) -> None:
    assert (await produce(client, TOPIC, batch(), acks=1)).error_code == ErrorCode.NONE
    first = await fetch_one(client, replica_fetch(cluster, 0))
    assert first.error_code == ErrorCode.NONE
    assert first.high_watermark == 0
    assert len(first.records or b"") > 0  # past the high watermark: a follower reads to the end
    second = await fetch_one(client, replica_fetch(cluster, 1, last_fetched_epoch=0))
    assert second.error_code == ErrorCode.NONE
    assert second.high_watermark == 1
    consumer = await fetch_one(client, fetch_request(TOPIC, 0))
    assert consumer.high_watermark == 1
    assert len(consumer.records or b"") > 0


async def test_acks_all_completes_when_the_follower_catches_up(
    cluster: BrokerState, client: KafkaClient, broker: EmbeddedBroker
) -> None:
    follower = await KafkaClient.connect(broker.bootstrap)
    outcome: list[int] = []

    async def acks_all() -> None:
        outcome.append((await produce(client, TOPIC, batch(), acks=-1)).error_code)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(acks_all)
            log = cluster.logs.get(TOPIC, 0)
            assert log is not None
            with trio.fail_after(5):
                while log.log_end_offset == 0:
                    await trio.testing.wait_all_tasks_blocked()
                    await trio.lowlevel.checkpoint()
            assert not outcome
            answer = await fetch_one(follower, replica_fetch(cluster, 1, last_fetched_epoch=0))
            assert answer.high_watermark == 1
    finally:
        await follower.aclose()
    assert outcome == [ErrorCode.NONE]


async def test_a_marker_answers_once_the_isr_holds_it(
    cluster: BrokerState, broker: EmbeddedBroker
) -> None:
    """WriteTxnMarkers' data path (`write_txn_markers`) waits like acks=all: NONE means the
    marker is committed on every ISR member; without the follower it times out."""
    follower = await KafkaClient.connect(broker.bootstrap)
    outcome: list[ErrorCode] = []

    async def abort(timeout_ms: int = 5000) -> ErrorCode:
        result = await write_txn_markers(
            cluster,
            cluster.replication,
            cluster.waiters,
            cluster.min_isr,
            [(TOPIC, 0)],
            producer_id=77,
            producer_epoch=0,
            coordinator_epoch=0,
            commit=False,
            timeout_ms=timeout_ms,
        )
        return result[(TOPIC, 0)]

    async def write() -> None:
        outcome.append(await abort())

    log = cluster.logs.get(TOPIC, 0)
    assert log is not None
    try:
        assert await abort(timeout_ms=50) == ErrorCode.REQUEST_TIMED_OUT
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            with trio.fail_after(5):
                while log.log_end_offset < 2:
                    await trio.testing.wait_all_tasks_blocked()
                    await trio.lowlevel.checkpoint()
            assert not outcome
            answer = await fetch_one(follower, replica_fetch(cluster, 2, last_fetched_epoch=0))
            assert answer.high_watermark == 2
    finally:
        await follower.aclose()
    assert outcome == [ErrorCode.NONE]


@pytest.mark.parametrize("replica", [3, 7])
async def test_a_fetch_from_a_replica_not_assigned_is_refused(
    cluster: BrokerState, client: KafkaClient, replica: int
) -> None:
    answer = await fetch_one(client, replica_fetch(cluster, 0, replica=replica))
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_fetch_from_an_older_incarnation_is_refused(
    cluster: BrokerState, client: KafkaClient
) -> None:
    epoch = _epoch(cluster, 2)
    assert (
        await fetch_one(client, replica_fetch(cluster, 0, epoch=epoch))
    ).error_code == ErrorCode.NONE
    stale = await fetch_one(client, replica_fetch(cluster, 0, epoch=epoch - 1))
    assert stale.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_diverged_follower_gets_the_diverging_epoch(
    cluster: BrokerState, client: KafkaClient
) -> None:
    assert (await produce(client, TOPIC, batch(), acks=1)).error_code == ErrorCode.NONE
    # the follower holds epoch 0 up to offset 3; this leader's epoch 0 ends at 1
    answer = await fetch_one(client, replica_fetch(cluster, 3, last_fetched_epoch=0))
    assert answer.error_code == ErrorCode.NONE
    assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (0, 1)
    # an epoch newer than any the leader knows cannot be placed (Kafka: OFFSET_OUT_OF_RANGE)
    newer = await fetch_one(client, replica_fetch(cluster, 1, last_fetched_epoch=5))
    assert newer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert not answer.records


async def test_a_stale_leader_epoch_is_fenced(cluster: BrokerState, client: KafkaClient) -> None:
    request = replica_fetch(cluster, 0)
    request.topics[0].partitions[0].current_leader_epoch = 3
    assert (await fetch_one(client, request)).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_a_lagging_follower_leaves_the_isr(cluster: BrokerState) -> None:
    """No fetch from broker 2 for longer than replica.lag.time.max.ms: the leader proposes
    ISR [1] through AlterPartition and the controller commits it."""
    manager = cluster.replication
    start = cluster.clock()
    cluster.clock = lambda: start + 60_000
    manager.check_isr()
    with trio.fail_after(5):
        while (p := cluster.image.partition(TOPIC, 0)) is not None and p.isr != (1,):
            await trio.testing.wait_all_tasks_blocked()
            await trio.lowlevel.checkpoint()
    assert manager.leaders[(TOPIC, 0)].replica_set.isr == {1}


async def test_alter_partition_through_the_controller(cluster: BrokerState) -> None:
    topic = cluster.image.topic(TOPIC)
    assert topic is not None
    partition = topic.partitions[0]
    request = AlterPartitionRequest(
        broker_id=1,
        broker_epoch=cluster.controller.broker_epoch,
        topics=[
            AlterPartitionRequest.TopicData(
                topic.topic_id,
                [
                    AlterPartitionRequest.PartitionData(
                        partition_index=0,
                        leader_epoch=partition.leader_epoch,
                        new_isr_with_epochs=[AlterPartitionRequest.BrokerState(1, -1)],
                        partition_epoch=partition.partition_epoch,
                    )
                ],
            )
        ],
    )
    response = await cluster.controller.alter_partition(request, 3)
    assert isinstance(response, AlterPartitionResponse)
    [answer] = response.topics[0].partitions
    assert (answer.error_code, answer.isr) == (ErrorCode.NONE, [1])
    stale = await cluster.controller.alter_partition(request, 3)
    assert stale.topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION


async def test_acks_all_completes_when_the_controller_drops_the_follower(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """The follower is fenced (its session ended): the controller takes it out of the ISR, and
    the leader's high watermark moves at once to what the smaller ISR holds."""
    outcome: list[int] = []

    async def acks_all() -> None:
        outcome.append((await produce(client, TOPIC, batch(), acks=-1)).error_code)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(acks_all)
        log = cluster.logs.get(TOPIC, 0)
        assert log is not None
        with trio.fail_after(5):
            while log.log_end_offset == 0:
                await trio.testing.wait_all_tasks_blocked()
                await trio.lowlevel.checkpoint()
        assert not outcome
        # at once, not at the next periodic ISR check (replica.lag.time.max.ms / 2 = 500 ms)
        with trio.fail_after(0.3):
            await fence(cluster, 2, _epoch(cluster, 2))
            while not outcome:
                await trio.testing.wait_all_tasks_blocked()
                await trio.lowlevel.checkpoint()
    assert outcome == [ErrorCode.NONE]
    partition = cluster.image.partition(TOPIC, 0)
    assert partition is not None
    assert partition.isr == (1,)


# --- DeleteRecords waits for the low watermark ---------------------------------------------------


async def delete_records(
    client: KafkaClient, topic: str, offset: int, timeout_ms: int = 5000
) -> DeleteRecordsResponse.DeleteRecordsPartitionResult:
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                topic, [DeleteRecordsRequest.DeleteRecordsPartition(0, offset)]
            )
        ],
        timeout_ms=timeout_ms,
    )
    response = await client.request(request, 2, DeleteRecordsResponse)
    [partition] = response.topics[0].partitions
    return partition


async def _replicated(state: BrokerState, client: KafkaClient, count: int) -> None:
    """`count` records on the leader, fetched by the follower (log start 0): high watermark
    `count`."""
    for _ in range(count):
        assert (await produce(client, TOPIC, batch(), acks=1)).error_code == ErrorCode.NONE
    await fetch_one(client, replica_fetch(state, 0, log_start=0))
    answer = await fetch_one(client, replica_fetch(state, count, last_fetched_epoch=0, log_start=0))
    assert answer.high_watermark == count


async def _until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(5):
        while not condition():
            await trio.testing.wait_all_tasks_blocked()
            await trio.lowlevel.checkpoint()


async def test_delete_records_waits_for_the_followers_log_start(
    cluster: BrokerState, client: KafkaClient, broker: EmbeddedBroker
) -> None:
    """The leader's log start moves at once, the answer only once the follower's fetch says its
    log start reached the offset (Kafka's DelayedDeleteRecords on the low watermark)."""
    await _replicated(cluster, client, 3)
    log = cluster.logs.get(TOPIC, 0)
    assert log is not None
    follower = await KafkaClient.connect(broker.bootstrap)
    answers: list[DeleteRecordsResponse.DeleteRecordsPartitionResult] = []

    async def delete() -> None:
        answers.append(await delete_records(client, TOPIC, 2))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(delete)
            await _until(lambda: log.log_start_offset == 2)
            await trio.testing.wait_all_tasks_blocked()
            assert not answers  # the follower still starts at 0
            # the follower learns the leader's log start from a fetch answer ...
            answer = await fetch_one(follower, replica_fetch(cluster, 3, last_fetched_epoch=0,
                                                             log_start=0))  # fmt: skip
            assert answer.log_start_offset == 2
            await trio.testing.wait_all_tasks_blocked()
            assert not answers
            # ... and reports its own, moved, in the next fetch
            await fetch_one(follower, replica_fetch(cluster, 3, last_fetched_epoch=0, log_start=2))
            await _until(lambda: bool(answers))
    finally:
        await follower.aclose()
    [result] = answers
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 2)
    manager = cluster.replication
    assert manager.low_watermark((TOPIC, 0)) == 2


async def test_delete_records_times_out_without_the_follower(
    cluster: BrokerState, client: KafkaClient
) -> None:
    await _replicated(cluster, client, 3)
    result = await delete_records(client, TOPIC, -1, timeout_ms=50)  # -1: the high watermark
    # the low watermark as it was after the leader's deletion: the follower's log start
    assert (result.error_code, result.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, 0)
    log = cluster.logs.get(TOPIC, 0)
    assert log is not None
    assert log.log_start_offset == 3  # the leader's deletion stands


async def test_delete_records_stops_waiting_for_a_fenced_follower(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """Only replicas on live brokers count: once the follower's broker is fenced the low
    watermark is the leader's log start, and the waiting request completes."""
    await _replicated(cluster, client, 3)
    answers: list[DeleteRecordsResponse.DeleteRecordsPartitionResult] = []

    async def delete() -> None:
        answers.append(await delete_records(client, TOPIC, 1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(delete)
        await trio.testing.wait_all_tasks_blocked()
        assert not answers
        await fence(cluster, 2, _epoch(cluster, 2))
        await _until(lambda: bool(answers))
    [result] = answers
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 1)


async def test_delete_records_on_a_single_replica_answers_at_once(
    cluster: BrokerState, client: KafkaClient
) -> None:
    for _ in range(2):
        assert (await produce(client, SINGLE, batch(), acks=1)).error_code == ErrorCode.NONE
    result = await delete_records(client, SINGLE, 1, timeout_ms=0)
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 1)


def _session_fetch(
    state: BrokerState, session_id: int, epoch: int, offset: int | None = None
) -> FetchRequest:
    """broker 2's incremental Fetch in its session, naming partition 0 at `offset` or nothing."""
    request = replica_fetch(state, 0 if offset is None else offset, epoch=_epoch(state, 2))
    request.session_id, request.session_epoch = session_id, epoch
    if offset is None:
        request.topics = []
    return request


async def test_a_follower_session_reads_only_partitions_with_news(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """KIP-227 for followers: after the full Fetch, an incremental one that names nothing
    answers nothing while nothing changed, and the records of an append since; the high
    watermark the follower's next Fetch moves rides on a later answer."""
    full = _session_fetch(cluster, 0, 0, offset=0)
    created = await client.request(full, 15, FetchResponse)
    session = created.session_id
    assert session != 0
    waiting = _session_fetch(cluster, session, 1)
    waiting.max_wait_ms, waiting.min_bytes = 200, 1
    started = trio.current_time()
    idle = await client.request(waiting, 15, FetchResponse)
    assert (idle.error_code, idle.responses) == (ErrorCode.NONE, [])
    assert trio.current_time() - started >= 0.2  # parked its max_wait_ms: nothing to answer
    assert (await produce(client, TOPIC, batch(), acks=1)).error_code == ErrorCode.NONE
    news = await client.request(_session_fetch(cluster, session, 2), 15, FetchResponse)
    [topic] = news.responses
    [partition] = topic.partitions
    assert len(partition.records or b"") > 0
    assert partition.high_watermark == 0
    moved = await client.request(_session_fetch(cluster, session, 3, offset=1), 15, FetchResponse)
    [topic] = moved.responses
    assert topic.partitions[0].high_watermark == 1  # the ISR (1, 2) holds offset 0
    log = cluster.logs.get(TOPIC, 0)
    assert log is not None
    assert log.high_watermark == 1


async def test_a_parked_follower_session_fetch_wakes_on_an_append(
    cluster: BrokerState, client: KafkaClient, broker: EmbeddedBroker
) -> None:
    created = await client.request(_session_fetch(cluster, 0, 0, offset=0), 15, FetchResponse)
    parked = _session_fetch(cluster, created.session_id, 1)
    parked.max_wait_ms, parked.min_bytes = 10_000, 1
    producer = await KafkaClient.connect(broker.bootstrap)
    try:
        async with trio.open_nursery() as nursery:

            async def append_soon() -> None:
                await trio.testing.wait_all_tasks_blocked()
                await produce(producer, TOPIC, batch(), acks=1)

            nursery.start_soon(append_soon)
            with trio.fail_after(5):  # far less than max_wait_ms: the append woke it
                answer = await client.request(parked, 15, FetchResponse)
    finally:
        await producer.aclose()
    [topic] = answer.responses
    assert len(topic.partitions[0].records or b"") > 0
    assert cluster.waiters.parked() >= 1  # the session still watches its partition


async def test_a_closed_follower_session_stops_watching(
    cluster: BrokerState, client: KafkaClient
) -> None:
    created = await client.request(_session_fetch(cluster, 0, 0, offset=0), 15, FetchResponse)
    await client.request(_session_fetch(cluster, created.session_id, 1), 15, FetchResponse)
    assert cluster.waiters.parked() == 1
    close = _session_fetch(cluster, created.session_id, -1, offset=0)
    await client.request(close, 15, FetchResponse)
    assert cluster.waiters.parked() == 0


WIDE = "wide"
THREE = "three"


def _follower_fetch(
    state: BrokerState,
    topic: str,
    session_id: int,
    epoch: int,
    named: dict[int, int] | None = None,
    forgotten: tuple[int, ...] = (),
    *,
    replica: int = 2,
) -> FetchRequest:
    """`replica`'s Fetch v15 in a session naming `named` (partition -> fetch offset) of `topic`
    and forgetting `forgotten`; max_wait_ms 0."""
    image = state.image.topic(topic)
    assert image is not None
    named = named or {}
    return FetchRequest(
        replica_state=FetchRequest.ReplicaState(replica, _epoch(state, replica)),
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                topic_id=image.topic_id,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=p, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                    for p, offset in named.items()
                ],
            )
        ]
        if named
        else [],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic, image.topic_id, list(forgotten))]
        if forgotten
        else [],
    )


def _answered(response: FetchResponse) -> dict[int, FetchResponse.PartitionData]:
    assert response.error_code == ErrorCode.NONE
    return {p.partition_index: p for t in response.responses for p in t.partitions}


async def test_a_follower_session_watches_the_partitions_its_fetches_add_and_forget(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """The leader's watch follows the session's membership as incremental fetches add and
    forget partitions: an append to an added partition rides on the next answer, one to a
    forgotten partition does not, and a partition added again is watched again."""
    await create_placed(cluster, WIDE, [[1, 2], [1, 2]])

    async def fetch(request: FetchRequest) -> dict[int, FetchResponse.PartitionData]:
        return _answered(await client.request(request, 15, FetchResponse))

    created = await client.request(_follower_fetch(cluster, WIDE, 0, 0, {0: 0}), 15, FetchResponse)
    session = created.session_id
    assert session != 0
    assert await fetch(_follower_fetch(cluster, WIDE, session, 1)) == {}
    assert cluster.waiters.parked() == 1  # partition 0
    await fetch(_follower_fetch(cluster, WIDE, session, 2, {1: 0}))
    assert cluster.waiters.parked() == 2  # and partition 1, added
    assert (await produce(client, WIDE, batch(), partition=1, acks=1)).error_code == ErrorCode.NONE
    news = await fetch(_follower_fetch(cluster, WIDE, session, 3))
    assert news.keys() == {1}
    assert len(news[1].records or b"") > 0
    assert await fetch(_follower_fetch(cluster, WIDE, session, 4, forgotten=(0,))) == {}
    assert cluster.waiters.parked() == 1  # partition 0 forgotten: no longer watched
    assert (await produce(client, WIDE, batch(), partition=0, acks=1)).error_code == ErrorCode.NONE
    assert await fetch(_follower_fetch(cluster, WIDE, session, 5)) == {}
    again = await fetch(_follower_fetch(cluster, WIDE, session, 6, {0: 0}))
    assert again.keys() == {0}
    assert cluster.waiters.parked() == 2
    assert (await produce(client, WIDE, batch(), partition=0, acks=1)).error_code == ErrorCode.NONE
    assert (await fetch(_follower_fetch(cluster, WIDE, session, 7, {0: 1}))).keys() == {0}


async def test_an_idle_partitions_new_high_watermark_rides_on_the_next_answer(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """KIP-227: broker 2's session names nothing, yet its next answer carries the partition
    whose high watermark broker 3's fetch moved."""
    await create_placed(cluster, THREE, [[1, 2, 3]])
    assert (await produce(client, THREE, batch(), acks=1)).error_code == ErrorCode.NONE
    created = await client.request(_follower_fetch(cluster, THREE, 0, 0, {0: 0}), 15, FetchResponse)
    session = created.session_id
    caught_up = _answered(
        await client.request(_follower_fetch(cluster, THREE, session, 1, {0: 1}), 15, FetchResponse)
    )
    assert all(p.high_watermark == 0 for p in caught_up.values())  # broker 3 is still at 0
    idle = await client.request(_follower_fetch(cluster, THREE, session, 2), 15, FetchResponse)
    assert _answered(idle) == {}
    three = _follower_fetch(cluster, THREE, 0, -1, {0: 1}, replica=3)  # sessionless
    assert _answered(await client.request(three, 15, FetchResponse))[0].high_watermark == 1
    news = await client.request(_follower_fetch(cluster, THREE, session, 3), 15, FetchResponse)
    answered = _answered(news)
    assert answered.keys() == {0}
    assert (answered[0].high_watermark, answered[0].records or b"") == (1, b"")


async def test_a_session_does_not_read_again_the_high_watermark_its_own_fetch_moved(
    cluster: BrokerState, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fetch whose acknowledgement moves the high watermark carries the new one, so its
    session's next fetch does not read the partition again for that move (the read would be
    left out of the answer); the other follower's session reads it and gets the move."""
    await create_placed(cluster, THREE, [[1, 2, 3]])
    assert (await produce(client, THREE, batch(), acks=1)).error_code == ErrorCode.NONE
    sessions = {}
    for replica in (2, 3):
        created = await client.request(
            _follower_fetch(cluster, THREE, 0, 0, {0: 0}, replica=replica), 15, FetchResponse
        )
        sessions[replica] = created.session_id
    acked = await client.request(
        _follower_fetch(cluster, THREE, sessions[3], 1, {0: 1}, replica=3), 15, FetchResponse
    )
    assert _answered(acked) == {}  # broker 2 is still at 0: no move, nothing new to answer
    moved = await client.request(
        _follower_fetch(cluster, THREE, sessions[2], 1, {0: 1}), 15, FetchResponse
    )
    assert _answered(moved)[0].high_watermark == 1  # broker 2's ack moved it
    reads: list[list[int]] = []
    real = fetch_read.read_partitions

    def counted(*args: Any, **kwargs: Any) -> list[PartitionRead]:
        found = real(*args, **kwargs)
        reads.append([r.part.partition for r in found])
        return found

    monkeypatch.setattr(follower_sessions, "read_partitions", counted)
    idle = await client.request(_follower_fetch(cluster, THREE, sessions[2], 2), 15, FetchResponse)
    assert (_answered(idle), reads) == ({}, [])  # its own move: already answered, not read
    news = await client.request(
        _follower_fetch(cluster, THREE, sessions[3], 2, replica=3), 15, FetchResponse
    )
    assert _answered(news)[0].high_watermark == 1  # broker 3 has not been told yet
    assert reads == [[0]]


async def test_an_idle_partitions_new_log_start_rides_on_the_next_answer(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """KIP-227: DeleteRecords moves the leader's log start of a partition the follower's
    session has left quiet; the next incremental answer carries it."""
    await _replicated(cluster, client, 3)
    created = await client.request(_follower_fetch(cluster, TOPIC, 0, 0, {0: 3}), 15, FetchResponse)
    session = created.session_id
    idle = await client.request(_follower_fetch(cluster, TOPIC, session, 1), 15, FetchResponse)
    assert _answered(idle) == {}
    result = await delete_records(client, TOPIC, 2, timeout_ms=50)  # the follower starts at 0
    assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
    news = await client.request(_follower_fetch(cluster, TOPIC, session, 2), 15, FetchResponse)
    answered = _answered(news)
    assert answered.keys() == {0}
    assert (answered[0].log_start_offset, answered[0].high_watermark) == (2, 3)


async def test_an_idle_follower_stays_in_the_isr_while_its_session_fetches(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """Kafka's lastCaughtUpTimeMs for a partition a follower's session leaves quiet: a follower
    caught up at its last read of the partition, whose session kept fetching, was caught up
    when its latest fetch started. An append then finds it in the ISR until
    replica.lag.time.max.ms (1 s here) after that fetch, and out once that has passed."""
    manager = cluster.replication
    replicas = manager.leaders[(TOPIC, 0)].replica_set
    created = await client.request(_follower_fetch(cluster, TOPIC, 0, 0, {0: 0}), 15, FetchResponse)
    session = created.session_id
    start = cluster.clock()
    await client.request(_follower_fetch(cluster, TOPIC, session, 1), 15, FetchResponse)
    cluster.clock = lambda: start + 5_000  # the partition stays idle; the session fetches on
    quiet = await client.request(_follower_fetch(cluster, TOPIC, session, 2), 15, FetchResponse)
    assert _answered(quiet) == {}
    assert (await produce(client, TOPIC, batch(), acks=1)).error_code == ErrorCode.NONE
    cluster.clock = lambda: start + 5_900  # the follower has not fetched the append yet
    manager.check_isr()
    assert replicas.pending is None
    assert replicas.isr == {1, 2}
    cluster.clock = lambda: start + 6_100  # and never does
    manager.check_isr()
    await _until(lambda: (p := cluster.image.partition(TOPIC, 0)) is not None and p.isr == (1,))
