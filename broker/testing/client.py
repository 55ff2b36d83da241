"""A minimal trio Kafka client over `wire.ClientConnection`.

Strom's own tests use it to send exact requests at exact versions; later the
replica fetcher and inter-broker calls will too. One request at a time per
client keeps it simple; open more clients for concurrency.
"""

from __future__ import annotations

import ssl
from typing import TypeVar

import trio

from strom.broker.security.sasl_client import SaslClient, login
from strom.wire.connection import CLOSED, NEED_DATA, ClientConnection, decode_request_header
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message
from strom.wire.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from strom.wire.messages.sasl_authenticate import SaslAuthenticateResponse
from strom.wire.messages.sasl_handshake import SaslHandshakeResponse

R = TypeVar("R", bound=Message)


class KafkaClient:
    def __init__(self, stream: trio.abc.Stream, client_id: str | None = "strom-client") -> None:
        self.stream = stream
        self.conn = ClientConnection(client_id)
        self._lock = trio.Lock()

    @classmethod
    async def connect(
        cls,
        bootstrap: str,
        client_id: str | None = "strom-client",
        ssl_context: ssl.SSLContext | None = None,
    ) -> KafkaClient:
        """Connect to `host:port`; over TLS with `ssl_context`."""
        host, port = bootstrap.rsplit(":", 1)
        if ssl_context is not None:
            stream: trio.abc.Stream = await trio.open_ssl_over_tcp_stream(
                host, int(port), ssl_context=ssl_context
            )
            return cls(stream, client_id)
        return cls(await trio.open_tcp_stream(host, int(port)), client_id)

    async def request(self, body: Message, version: int, response_type: type[R]) -> R:
        """Send `body` at `version` and return the decoded response.

        Answers to earlier requests that were cut off before reading theirs (cancelled, timed
        out) are skipped: the broker still sends them, first, and each request reads only its
        own (found by simulation seed 5692, where a Fetch read the ProduceResponse of a
        Produce that had timed out while the Fetch waited for the connection)."""
        async with self._lock:
            frame = self.conn.send_request(body, version)
            mine = decode_request_header(memoryview(frame)[4:])[0].correlation_id
            await self.stream.send_all(frame)
            while True:
                event = self.conn.next_response()
                if event is NEED_DATA:
                    data = await self.stream.receive_some(256 * 1024)
                    self.conn.receive_data(data)
                    continue
                if event is CLOSED:
                    raise ProtocolError("broker closed the connection", ErrorCode.NETWORK_EXCEPTION)
                assert isinstance(event, tuple)
                correlation, response = event
                if correlation != mine:
                    continue
                if not isinstance(response, response_type):
                    raise TypeError(
                        f"expected {response_type.__name__}, got {type(response).__name__}"
                    )
                return response

    async def login(self, client: SaslClient) -> int:
        """Authenticate this connection (SaslHandshake v1, SaslAuthenticate v2); returns the
        session lifetime. SaslLoginError when the broker refuses."""

        async def send(body: Message, version: int) -> Message:
            kinds = {17: SaslHandshakeResponse, 36: SaslAuthenticateResponse}
            assert body.API_KEY is not None
            return await self.request(body, version, kinds[body.API_KEY])

        return await login(send, client)

    async def send_only(self, body: Message, version: int) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        async with self._lock:
            await self.stream.send_all(self.conn.send_request(body, version, expect_response=False))

    async def aclose(self) -> None:
        await self.stream.aclose()


async def describe_quorum(address: str) -> DescribeQuorumResponse:
    """DescribeQuorum (v2) of `__cluster_metadata-0` at `address`, as `kafka-metadata-quorum`
    asks it (one connection, closed after the answer)."""
    client = await KafkaClient.connect(address, "kafka-metadata-quorum")
    try:
        request = DescribeQuorumRequest(
            topics=[
                DescribeQuorumRequest.TopicData(
                    "__cluster_metadata", [DescribeQuorumRequest.PartitionData(0)]
                )
            ]
        )
        return await client.request(request, 2, DescribeQuorumResponse)
    finally:
        await client.aclose()
