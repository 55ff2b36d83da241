"""KIP-392 on one in-process node with extra registered brokers (tests/broker/cluster_helpers):
a follower replica serves consumers' Fetch v11+ up to its high watermark, and the leader names
the preferred read replica Kafka's RackAwareReplicaSelector would. The selector itself is a
pure function (`read_replica.select_read_replica`)."""

from __future__ import annotations

import pytest
import trio

from strom.broker.replication.read_replica import ReplicaView, select_read_replica
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.config.broker import LEADER_SELECTOR, RACK_AWARE_SELECTOR
from strom.wire.errors import ErrorCode
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from tests.broker.cluster_helpers import CLUSTER_OVERRIDES, create_placed, register, state_of
from tests.broker.test_produce_helpers import batch as produce_batch
from tests.broker.test_produce_helpers import fetch_request, produce
from tests.log.helpers import T0, batch

pytestmark = pytest.mark.trio

PLACED = [[2, 1, 3], [1, 2, 3]]
"""Partition 0: led by broker 2, a follower here; partition 1: led here, followed by 2 and 3."""


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {
        **CLUSTER_OVERRIDES,
        "broker.rack": "r1",
        "replica.selector.class": RACK_AWARE_SELECTOR,
    }


@pytest.fixture
async def cluster(broker: EmbeddedBroker) -> BrokerState:
    state = state_of(broker)
    await register(state, 2, rack="r2")
    await register(state, 3, rack="r3")
    await create_placed(state, "placed", PLACED)
    return state


async def _consumer_fetch(
    client: KafkaClient, partition: int, offset: int, version: int = 11, **fields: object
) -> FetchResponse.PartitionData:
    request = fetch_request("placed", offset, partition=partition)
    for name, value in fields.items():
        if name == "rack_id":
            request.rack_id = str(value)
        elif name == "max_wait_ms":
            request.max_wait_ms, request.min_bytes = int(str(value)), 1
        else:
            setattr(request.topics[0].partitions[0], name, value)
    response = await client.request(request, version, FetchResponse)
    [p] = response.responses[0].partitions
    return p


async def test_a_follower_serves_consumers_up_to_its_high_watermark(
    cluster: BrokerState, client: KafkaClient
) -> None:
    log = cluster.logs.get("placed", 0)
    assert log is not None
    for value in (b"a", b"b", b"c"):
        log.append(batch([value]), 0, T0)  # as if replicated from broker 2
    log.update_high_watermark(2)
    served = await _consumer_fetch(client, 0, 0)
    assert (served.error_code, served.high_watermark, served.log_start_offset) == (0, 2, 0)
    assert bytes(served.records or b"") == log.read(0, 1 << 20, max_offset=2).read_bytes()
    for offset in (2, 3):  # at the high watermark, and past it within the log: nothing yet
        empty = await _consumer_fetch(client, 0, offset)
        assert (empty.error_code, bytes(empty.records or b""), empty.high_watermark) == (0, b"", 2)
    beyond = await _consumer_fetch(client, 0, 4)
    assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    newer = await _consumer_fetch(client, 0, 0, 12, current_leader_epoch=1)
    assert newer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    older = await _consumer_fetch(client, 0, 0, 10)
    assert older.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # before v11: leaders only
    assert older.preferred_read_replica == -1


async def _follower_fetch(
    client: KafkaClient, cluster: BrokerState, replica: int, offset: int
) -> FetchResponse.PartitionData:
    topic = cluster.image.topic("placed")
    assert topic is not None
    request = fetch_request("placed", offset, partition=1)
    request.topics[0].topic_id = topic.topic_id
    request.replica_state = FetchRequest.ReplicaState(replica, -1)  # -1: no broker epoch
    response = await client.request(request, 15, FetchResponse)
    [p] = response.responses[0].partitions
    return p


async def test_the_leader_names_the_follower_on_the_consumers_rack(
    cluster: BrokerState, client: KafkaClient
) -> None:
    for _ in range(3):
        assert (await produce(client, "placed", produce_batch(), partition=1, acks=1)).error_code == 0
    caught_up = await _follower_fetch(client, cluster, 2, 3)  # broker 2 holds offsets 0-2
    assert (caught_up.error_code, caught_up.high_watermark) == (0, 0)  # broker 3 never fetched
    with trio.fail_after(30):  # answered at once, not after max_wait_ms (Kafka's rule)
        redirected = await _consumer_fetch(client, 1, 0, rack_id="r2", max_wait_ms=600_000)
    assert (redirected.error_code, redirected.preferred_read_replica) == (0, 2)
    assert bytes(redirected.records or b"") == b""  # Kafka skips the read
    for rack in ("r3", "r1", "elsewhere", ""):  # not caught up; the leader's; none; no rack
        here = await _consumer_fetch(client, 1, 0, rack_id=rack)
        assert (here.error_code, here.preferred_read_replica) == (0, -1), rack
    beyond = await _consumer_fetch(client, 1, 3, rack_id="r2")
    assert beyond.preferred_read_replica == 2  # broker 2's log holds offset 3 (its end)


async def test_the_selectors() -> None:
    leader = ReplicaView(1, "a", 10, 0)
    b_behind, b_ahead = ReplicaView(2, "b", 8, 0), ReplicaView(3, "b", 10, 50)
    b_fresher = ReplicaView(4, "b", 10, 5)
    followers = [b_behind, b_ahead, b_fresher, ReplicaView(5, "c", 10, 0)]
    assert select_read_replica(RACK_AWARE_SELECTOR, "b", leader, followers) == 4
    assert select_read_replica(RACK_AWARE_SELECTOR, "c", leader, followers) == 5
    assert select_read_replica(RACK_AWARE_SELECTOR, "a", leader, followers) == -1
    assert select_read_replica(RACK_AWARE_SELECTOR, "d", leader, followers) == -1
    assert select_read_replica(RACK_AWARE_SELECTOR, "", leader, followers) == -1
    assert select_read_replica(LEADER_SELECTOR, "b", leader, followers) == -1
    assert select_read_replica(None, "b", leader, followers) == -1
