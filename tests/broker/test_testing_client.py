"""The test client (`strom.broker.testing.client.KafkaClient`) never hands one request's
response to another: a request cut off before its response is read leaves the connection
unusable (found by simulation seed 5692, where a Fetch read the ProduceResponse of a Produce
that had timed out while the Fetch waited for the connection)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from strom.broker.testing.client import KafkaClient
from strom.wire.connection import NEED_DATA, Connection, Request
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

pytestmark = pytest.mark.trio


async def _answer_late(stream: trio.abc.Stream, answered: trio.Event) -> None:
    """A broker that answers each request only once two have arrived, in order."""
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
            ApiVersionsResponse()
            if isinstance(request.body, ApiVersionsRequest)
            else MetadataResponse()
        )
        await stream.send_all(conn.send_response(request, body))
    answered.set()


async def test_a_request_cut_off_before_its_answer_leaves_the_connection_unusable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_side, broker_side = trio.testing.memory_stream_pair()
    client = KafkaClient(client_side)
    answered = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_answer_late, broker_side, answered)
        with trio.move_on_after(1):  # sent, never answered in time
            await client.request(ApiVersionsRequest(), 3, ApiVersionsResponse)
        with pytest.raises(trio.BrokenResourceError):
            await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)
        # the broker side still gets its second request (sent raw), so it answers both
        await client_side.send_all(client.conn.send_request(MetadataRequest(topics=[]), 12))
        await answered.wait()


async def test_a_request_waiting_for_the_connection_does_not_send_after_one_was_cut_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_side, broker_side = trio.testing.memory_stream_pair()
    client = KafkaClient(client_side)
    outcome: list[BaseException | MetadataResponse] = []
    first_scope = trio.CancelScope()

    async def first() -> None:
        with first_scope:
            await client.request(ApiVersionsRequest(), 3, ApiVersionsResponse)

    async def second() -> None:
        try:
            outcome.append(await client.request(MetadataRequest(topics=[]), 12, MetadataResponse))
        except (trio.BrokenResourceError, TypeError) as exc:
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_answer_late, broker_side, trio.Event())
        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(second)  # waits for the connection the first one holds
        await trio.testing.wait_all_tasks_blocked()
        first_scope.cancel()  # the first is cut off after sending, the second goes on
        await trio.testing.wait_all_tasks_blocked()
        # Before the fix the second sent its request and read the first one's answer.
        assert len(outcome) == 1
        assert isinstance(outcome[0], trio.BrokenResourceError), outcome
        nursery.cancel_scope.cancel()
