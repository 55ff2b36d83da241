"""What a partition leader does with the outcome of its ISR changes, on one in-process node
(the leader; brokers 2 and 3 register but run nowhere and this test plays broker 2's fetches).

- An AlterPartition whose outcome is unknown (no answer, a controller change) may have
  committed: until the answer or the metadata settles it, the high watermark keeps counting
  the follower it adds, which the controller may already count in the ISR (Kafka's maximal
  ISR). Only INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED say the change was not made.
- KIP-903: a follower's state belongs to the incarnation whose fetches reported it; a restarted
  follower rejoins the ISR only after its new incarnation fetched and caught up.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
import trio
import trio.testing

from strom.broker.drivers.lifecycle import ControllerUnavailable
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.config.planted import planting
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from tests.broker.cluster_helpers import CLUSTER_OVERRIDES, create_placed, fence, register, state_of
from tests.broker.test_produce_helpers import batch, fetch_request, produce

pytestmark = pytest.mark.trio

TOPIC = "rep"
KEY = (TOPIC, 0)


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {**CLUSTER_OVERRIDES, "replica.lag.time.max.ms": "1000"}


DISK = uuid.UUID(int=0xD15C)
"""Broker 2's log directory id."""


@pytest.fixture
async def cluster(broker: EmbeddedBroker) -> BrokerState:
    state = state_of(broker)
    await register(state, 2, log_dirs=[DISK])
    await create_placed(state, TOPIC, [[1, 2]])
    return state


async def _until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(5):
        while not condition():
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0.001)


def _isr(state: BrokerState) -> tuple[int, ...]:
    partition = state.image.partition(TOPIC, 0)
    assert partition is not None
    return partition.isr


async def _fetch(
    state: BrokerState, client: KafkaClient, offset: int, epoch: int
) -> FetchResponse.PartitionData:
    """Broker 2's replica fetch of partition 0 from `offset`, naming broker epoch `epoch`."""
    request = fetch_request(TOPIC, offset)
    topic = state.image.topic(TOPIC)
    assert topic is not None
    request.topics[0].topic_id = topic.topic_id
    request.replica_state = FetchRequest.ReplicaState(2, epoch)
    request.topics[0].partitions[0].last_fetched_epoch = 0 if offset else -1
    response = await client.request(request, 15, FetchResponse)
    return response.responses[0].partitions[0]


async def _shrink_to_leader(state: BrokerState) -> None:
    """Broker 2 never fetched: past replica.lag.time.max.ms the leader drops it (ISR [1])."""
    manager = state.replication
    real = state.clock
    start = real()
    state.clock = lambda: start + 60_000
    manager.check_isr()
    await _until(lambda: _isr(state) == (1,))
    state.clock = real


async def _produce(client: KafkaClient, count: int) -> None:
    for _ in range(count):
        assert (await produce(client, TOPIC, batch(), acks=1)).error_code == ErrorCode.NONE


def _high_watermark(state: BrokerState) -> int:
    log = state.logs.get(TOPIC, 0)
    assert log is not None
    return log.high_watermark


async def test_an_unanswered_expansion_keeps_counting_the_follower(
    cluster: BrokerState, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader proposes ISR [1, 2] and gets no answer (it may have committed: a controller
    change, a lost answer). Records appended meanwhile are not committed past broker 2's log
    end; the proposal is sent again and, once the metadata holds it, nothing else changes."""
    await _shrink_to_leader(cluster)
    await _produce(client, 3)
    assert _high_watermark(cluster) == 3  # the ISR is the leader alone
    manager = cluster.replication
    send = manager._request
    sent: list[AlterPartitionRequest] = []

    async def unanswered(request: AlterPartitionRequest) -> AlterPartitionResponse:
        sent.append(request)
        raise ControllerUnavailable("no answer (test)")

    monkeypatch.setattr(manager, "_request", unanswered)
    epoch = cluster.image.broker(2).epoch  # type: ignore[union-attr]
    assert (await _fetch(cluster, client, 3, epoch)).error_code == ErrorCode.NONE
    await _until(lambda: bool(sent))  # broker 2 caught up: the leader proposed [1, 2]
    assert [m.broker_id for m in sent[0].topics[0].partitions[0].new_isr_with_epochs] == [1, 2]
    await _produce(client, 2)
    await trio.testing.wait_all_tasks_blocked()
    # the controller may count broker 2 in the ISR already: it holds only 3 records
    assert _high_watermark(cluster) == 3
    await _until(lambda: len(sent) >= 2)  # sent again, not forgotten
    monkeypatch.setattr(manager, "_request", send)
    await _until(lambda: _isr(cluster) == (1, 2))
    assert _high_watermark(cluster) == 3
    await _fetch(cluster, client, 5, epoch)
    await _until(lambda: _high_watermark(cluster) == 5)


@pytest.mark.parametrize(
    "error", [ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED]
)
async def test_a_change_the_controller_did_not_make_goes_back_to_the_committed_isr(
    cluster: BrokerState, client: KafkaClient, monkeypatch: pytest.MonkeyPatch, error: ErrorCode
) -> None:
    await _shrink_to_leader(cluster)
    await _produce(client, 3)
    manager = cluster.replication
    sent: list[AlterPartitionRequest] = []

    async def refused(request: AlterPartitionRequest) -> AlterPartitionResponse:
        sent.append(request)
        topic = request.topics[0]
        return AlterPartitionResponse(
            topics=[
                AlterPartitionResponse.TopicData(
                    topic.topic_id,
                    [AlterPartitionResponse.PartitionData(partition_index=0, error_code=error)],
                )
            ]
        )

    monkeypatch.setattr(manager, "_request", refused)
    epoch = cluster.image.broker(2).epoch  # type: ignore[union-attr]
    await _fetch(cluster, client, 3, epoch)
    await _until(lambda: bool(sent))
    await _until(lambda: manager.leaders[KEY].replica_set.pending is None)
    await _produce(client, 2)
    assert _high_watermark(cluster) == 5  # the ISR is still the leader alone
    assert len(sent) == 1  # not sent again by itself: the next fetch or check proposes anew


async def test_a_stale_partition_epoch_waits_for_the_metadata(
    cluster: BrokerState, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """INVALID_UPDATE_VERSION: the controller's partition moved on, maybe with this very
    change; the proposal stays in flight (broker 2 keeps counting) until the metadata says."""
    await _shrink_to_leader(cluster)
    await _produce(client, 3)
    manager = cluster.replication
    send = manager._request
    sent: list[AlterPartitionRequest] = []

    async def committed_elsewhere(request: AlterPartitionRequest) -> AlterPartitionResponse:
        sent.append(request)
        await send(request)  # it commits ...
        topic = request.topics[0]
        return AlterPartitionResponse(  # ... but the answer the leader sees is a refusal
            topics=[
                AlterPartitionResponse.TopicData(
                    topic.topic_id,
                    [
                        AlterPartitionResponse.PartitionData(
                            partition_index=0, error_code=ErrorCode.INVALID_UPDATE_VERSION
                        )
                    ],
                )
            ]
        )

    monkeypatch.setattr(manager, "_request", committed_elsewhere)
    epoch = cluster.image.broker(2).epoch  # type: ignore[union-attr]
    await _fetch(cluster, client, 3, epoch)
    await _until(lambda: _isr(cluster) == (1, 2))
    await _produce(client, 2)
    await trio.testing.wait_all_tasks_blocked()
    assert _high_watermark(cluster) == 3
    assert manager.leaders[KEY].replica_set.isr == {1, 2}
    assert len(sent) == 1


async def test_a_restarted_follower_rejoins_only_after_its_new_incarnation_caught_up(
    cluster: BrokerState, client: KafkaClient
) -> None:
    """Broker 2 fetched everything as one incarnation, then restarted (a new registration,
    maybe with a shorter log: a power cut loses what was not synced). What the old incarnation
    reported does not put the new one back in the ISR; its own fetches do."""
    await _produce(client, 3)
    old = cluster.image.broker(2).epoch  # type: ignore[union-attr]
    await _fetch(cluster, client, 0, old)
    await _fetch(cluster, client, 3, old)
    await _until(lambda: _high_watermark(cluster) == 3)
    await fence(cluster, 2, old)  # the old process is gone (out of the ISR)
    await _until(lambda: _isr(cluster) == (1,))
    new = await register(cluster, 2, incarnation=102, log_dirs=[DISK])
    assert new > old
    manager = cluster.replication
    manager.check_isr()
    await trio.testing.wait_all_tasks_blocked()
    await trio.sleep(0.05)
    manager.check_isr()
    await trio.testing.wait_all_tasks_blocked()
    assert _isr(cluster) == (1,)  # not on the old incarnation's word
    stale = await _fetch(cluster, client, 3, old)
    assert stale.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await _fetch(cluster, client, 1, new)).error_code == ErrorCode.NONE  # it lost 2
    manager.check_isr()
    await trio.testing.wait_all_tasks_blocked()
    assert _isr(cluster) == (1,)
    await _fetch(cluster, client, 3, new)
    await _until(lambda: _isr(cluster) == (1, 2))


# --- the planted bugs (strom.config.planted) are the ones these tests catch ------------------------


async def test_the_planted_forgetful_leader_is_caught(
    cluster: BrokerState, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with planting("isr-forgets-unanswered-proposal"), pytest.raises(AssertionError):
        await test_an_unanswered_expansion_keeps_counting_the_follower(cluster, client, monkeypatch)


async def test_the_planted_trust_in_an_old_incarnation_is_caught(
    cluster: BrokerState, client: KafkaClient
) -> None:
    with planting("isr-trusts-old-incarnation"), pytest.raises(AssertionError):
        await test_a_restarted_follower_rejoins_only_after_its_new_incarnation_caught_up(
            cluster, client
        )
