"""Pipelined acks=all Produce requests on one connection (`strom.broker.network.server`).

A Produce that waits for its replicas lets the connection read and append the next Produce;
the answers still go out in the requests' order, and any other request waits until every
answer before it is sent, as Kafka's one-at-a-time connection would answer it.

One in-process node leads partition 0 of "rep" on replicas [1, 2]; broker 2 runs nowhere, and
the test plays it by sending the Fetch a follower sends (as `test_replication_leader` does).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from strom.broker.security.sasl_client import SaslClient, login
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.connection import NEED_DATA
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.produce import ProduceResponse
from strom.wire.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from tests.broker.cluster_helpers import CLUSTER_OVERRIDES, create_placed, register, state_of
from tests.broker.test_produce_helpers import batch, produce_request
from tests.broker.test_replication_leader import fetch_one, replica_fetch
from tests.broker.test_sasl import ALICE_SECRET, SASL, sasl_address, sender

pytestmark = pytest.mark.trio

TOPIC = "rep"


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return dict(CLUSTER_OVERRIDES)


@pytest.fixture
async def cluster(broker: EmbeddedBroker) -> BrokerState:
    state = state_of(broker)
    await register(state, 2)
    await register(state, 3)
    await create_placed(state, TOPIC, [[1, 2]])
    return state


async def _send(client: KafkaClient, *requests: tuple[Message, int]) -> list[int]:
    """Send every request in one write, without waiting for answers; their correlation ids."""
    frames = [client.conn.send_request(body, version) for body, version in requests]
    await client.stream.send_all(b"".join(frames))
    return [int.from_bytes(frame[8:12], "big") for frame in frames]


async def _answers(client: KafkaClient, count: int) -> list[tuple[int, Any]]:
    got: list[tuple[int, Any]] = []
    while len(got) < count:
        event = client.conn.next_response()
        if event is NEED_DATA:
            client.conn.receive_data(await client.stream.receive_some(65536))
            continue
        assert isinstance(event, tuple), event
        got.append(event)
    return got


async def _until(condition: Any) -> None:
    with trio.fail_after(5):
        while not condition():
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0.001)


def _latest() -> ListOffsetsRequest:
    partition = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)
    return ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(TOPIC, [partition])]
    )


async def test_a_waiting_produce_lets_the_next_append_and_answers_stay_in_order(
    cluster: BrokerState, client: KafkaClient, broker: EmbeddedBroker
) -> None:
    log = cluster.logs.get(TOPIC, 0)
    assert log is not None
    first, second, listed = await _send(
        client,
        (produce_request(TOPIC, batch([b"a"])), 9),
        (produce_request(TOPIC, batch([b"b", b"c"])), 9),
        (_latest(), 7),
    )
    # both appended while the first still waits for broker 2; the ListOffsets waits for them
    await _until(lambda: log.log_end_offset == 3)
    assert log.high_watermark == 0
    follower = await KafkaClient.connect(broker.bootstrap)
    try:
        caught_up = await fetch_one(follower, replica_fetch(cluster, 3, last_fetched_epoch=0))
    finally:
        await follower.aclose()
    assert caught_up.high_watermark == 3
    answers = await _answers(client, 3)
    assert [correlation for correlation, _ in answers] == [first, second, listed]
    produced = [answer for _, answer in answers[:2]]
    assert all(isinstance(a, ProduceResponse) for a in produced)
    assert [
        (p.error_code, p.base_offset)
        for a in produced
        for t in a.responses
        for p in t.partition_responses
    ] == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 1)]
    latest = answers[2][1]
    assert isinstance(latest, ListOffsetsResponse)
    # handled after both answers, as a one-at-a-time connection would: the high watermark is 3
    assert latest.topics[0].partitions[0].offset == 3


async def test_deferred_answers_time_out_in_order(
    cluster: BrokerState, client: KafkaClient
) -> None:
    slow, quick = produce_request(TOPIC, batch([b"a"])), produce_request(TOPIC, batch([b"b"]))
    slow.timeout_ms, quick.timeout_ms = 300, 50  # the second times out first, answers second
    ids = await _send(client, (slow, 9), (quick, 9))
    answers = await _answers(client, 2)
    assert [correlation for correlation, _ in answers] == ids
    assert [
        a.responses[0].partition_responses[0].error_code for _, a in answers
    ] == [ErrorCode.REQUEST_TIMED_OUT] * 2


async def test_a_client_gone_with_answers_owed_harms_no_one(
    cluster: BrokerState, client: KafkaClient, broker: EmbeddedBroker
) -> None:
    request = produce_request(TOPIC, batch([b"a"]))
    request.timeout_ms = 100
    await _send(client, (request, 9), (request, 9))
    log = cluster.logs.get(TOPIC, 0)
    assert log is not None
    await _until(lambda: log.log_end_offset == 2)
    await client.aclose()
    other = await KafkaClient.connect(broker.bootstrap)
    try:
        answer = await other.request(_latest(), 7, ListOffsetsResponse)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE
        produced = await other.request(produce_request(TOPIC, batch([b"c"]), acks=1), 9, ProduceResponse)
        assert produced.responses[0].partition_responses[0].base_offset == 2
    finally:
        await other.aclose()


REAUTH = {**CLUSTER_OVERRIDES, **SASL, "connections.max.reauth.ms": "60000"}


@pytest.mark.parametrize("broker_overrides", [REAUTH])
async def test_a_reauthentication_is_answered_after_the_deferred_answers(
    cluster: BrokerState, broker: EmbeddedBroker
) -> None:
    """KIP-368: the authenticator answers a SaslHandshake itself; pipelined after two waiting
    Produces, its answer still comes third (librdkafka re-authenticates with requests in
    flight)."""
    client = await KafkaClient.connect(sasl_address(broker))
    try:
        await login(sender(client), SaslClient("PLAIN", "alice", ALICE_SECRET))
        first, second = produce_request(TOPIC, batch([b"a"])), produce_request(TOPIC, batch([b"b"]))
        first.timeout_ms = second.timeout_ms = 200  # broker 2 never fetches: both time out
        ids = await _send(
            client, (first, 9), (second, 9), (SaslHandshakeRequest(mechanism="PLAIN"), 1)
        )
        answers = await _answers(client, 3)
        assert [correlation for correlation, _ in answers] == ids
        assert isinstance(answers[2][1], SaslHandshakeResponse)
        assert answers[2][1].error_code == ErrorCode.NONE
    finally:
        await client.aclose()
