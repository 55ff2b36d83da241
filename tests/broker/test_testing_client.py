"""The test client (`strom.broker.testing.client.KafkaClient`) never hands one request's
answer to another: the answer of a request cut off before reading it is skipped (found by
simulation seed 5692, where a Fetch read the ProduceResponse of a Produce that had timed out
while the Fetch waited for the connection)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from strom.broker.testing.client import KafkaClient
from strom.wire.connection import NEED_DATA, Connection, Request
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

pytestmark = pytest.mark.trio


async def _answer_once_two_arrived(stream: trio.abc.Stream) -> None:
    """A broker that answers the first request only once the second has arrived, in order."""
    conn = Connection()
    requests: list[Request] = []
    while len(requests) < 2:
        event = conn.next_event()
        if event is NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
            continue
        assert isinstance(event, Request)
        requests.append(event)
    for request in requests:
        body = (
            ApiVersionsResponse(error_code=35)
            if isinstance(request.body, ApiVersionsRequest)
            else MetadataResponse(cluster_id="mine")
        )
        await stream.send_all(conn.send_response(request, body))


async def test_the_answer_of_a_request_cut_off_is_not_taken_by_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_side, broker_side = trio.testing.memory_stream_pair()
    client = KafkaClient(client_side)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_answer_once_two_arrived, broker_side)
        with trio.move_on_after(1) as waited:  # sent, not answered in time
            await client.request(ApiVersionsRequest(), 3, ApiVersionsResponse)
        assert waited.cancelled_caught
        answer = await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)
        assert answer.cluster_id == "mine"


async def test_a_request_waiting_for_the_connection_gets_its_own_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_side, broker_side = trio.testing.memory_stream_pair()
    client = KafkaClient(client_side)
    answers: list[MetadataResponse] = []
    first_scope = trio.CancelScope()

    async def first() -> None:
        with first_scope:
            await client.request(ApiVersionsRequest(), 3, ApiVersionsResponse)

    async def second() -> None:
        answers.append(await client.request(MetadataRequest(topics=[]), 12, MetadataResponse))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_answer_once_two_arrived, broker_side)
        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(second)  # waits for the connection the first one holds
        await trio.testing.wait_all_tasks_blocked()
        first_scope.cancel()  # the first is cut off after sending; the second goes on
    assert [a.cluster_id for a in answers] == ["mine"]
