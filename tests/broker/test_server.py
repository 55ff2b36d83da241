"""The server loop: versions, framing limits, pipelining, bad clients, shutdown."""

from __future__ import annotations

import logging
import socket
import struct
from pathlib import Path

import pytest
import trio

from strom.broker.data.fetch_read import SENDFILE_MIN_BYTES
from strom.broker.handlers import HANDLERS
from strom.broker.network.error_response import error_response
from strom.broker.network.server import resolve_overrides, set_buffer_sizes
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.config import BrokerConfig
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.formats.protocol.request_header import RequestHeader
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.fetch import FetchRequest
from strom.wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as Alter
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from tests.broker.test_produce_helpers import batch, create_topic, fetch_request, produce

pytestmark = pytest.mark.trio


async def raw_connect(broker: EmbeddedBroker) -> trio.SocketStream:
    host, port = broker.bootstrap.rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def read_frame(stream: trio.SocketStream) -> bytes | None:
    buf = b""
    while True:
        if len(buf) >= 4:
            size = struct.unpack_from(">i", buf)[0]
            if len(buf) >= 4 + size:
                return buf[4 : 4 + size]
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        buf += chunk


@pytest.mark.parametrize("version", range(5))
async def test_api_versions_lists_exactly_the_handlers(client: KafkaClient, version: int) -> None:
    response = await client.request(
        ApiVersionsRequest("strom-test", "1.0"), version, ApiVersionsResponse
    )
    assert response.error_code == ErrorCode.NONE
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {
        h.api_key: (h.advertised_min_version, h.max_version)
        for h in HANDLERS.values()
        if h.serves("broker")
    }
    assert 62 not in advertised  # BrokerRegistration: controller listeners only
    assert advertised[0] == (0, 12)  # Produce: v0 advertised, as Kafka 4.0 does (KAFKA-18659)


@pytest.mark.parametrize("version", [3, 4])
async def test_api_versions_reports_supported_and_finalized_features(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    """As a KRaft broker does: the node's registered ranges, the image's finalized levels and
    its offset as the epoch (Admin#describeFeatures and kafka-features.sh read them)."""
    response = await client.request(
        ApiVersionsRequest("strom-test", "1.0"), version, ApiVersionsResponse
    )
    state = broker.broker.state
    assert state is not None
    image = state.image
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("eligible.leader.replicas.version", 1 if version < 4 else 0, 1),  # KIP-1022
        ("metadata.version", 7, 25),
        ("transaction.version", 1 if version < 4 else 0, 2),
    ]
    assert [
        (f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features
    ] == [("metadata.version", 25, 25), ("transaction.version", 2, 2)]
    assert response.finalized_features_epoch == image.provenance.offset >= 0


async def test_api_versions_rejects_bad_software_name(client: KafkaClient) -> None:
    response = await client.request(ApiVersionsRequest("bad name!", "1"), 3, ApiVersionsResponse)
    assert response.error_code == ErrorCode.INVALID_REQUEST


async def test_too_new_api_versions_gets_v0_fallback(broker: EmbeddedBroker) -> None:
    stream = await raw_connect(broker)
    header = RequestHeader(18, 77, 1234, "future-client").encode(2)
    await stream.send_all(frame(header + b"\x00\x00"))
    payload = await read_frame(stream)
    assert payload is not None
    assert struct.unpack_from(">i", payload)[0] == 1234
    body = ApiVersionsResponse.decode(payload[4:], 0)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == 18 and k.max_version == 4 for k in body.api_keys)
    await stream.aclose()


async def test_bad_client_is_closed_and_others_keep_working(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    bad = await raw_connect(broker)
    header = RequestHeader(3, 12, 1, "bad").encode(2)
    await bad.send_all(frame(header + b"\xff\xff\xff\xff\xff\xff"))  # a varint that never ends
    assert await read_frame(bad) is None  # closed without a response
    await bad.aclose()
    response = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
    assert response.cluster_id


async def test_unsupported_version_closes_only_that_connection(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    bad = await raw_connect(broker)
    await bad.send_all(frame(RequestHeader(3, 99, 1, "bad").encode(1)))
    assert await read_frame(bad) is None
    await bad.aclose()
    response = await client.request(ApiVersionsRequest("a", "1"), 3, ApiVersionsResponse)
    assert response.error_code == 0


async def _crash(*args: object) -> None:
    raise RuntimeError("boom")


async def test_handler_crash_answers_unknown_server_error(
    broker: EmbeddedBroker,
    client: KafkaClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kafka answers a failed request with its error response; the connection stays usable."""
    monkeypatch.setattr(HANDLERS[HeartbeatRequest.API_KEY], "_handle", _crash)
    response = await client.request(HeartbeatRequest("g", 1, "m"), 4, HeartbeatResponse)
    assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    again = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
    assert again.cluster_id
    [line] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "RuntimeError: boom" in line.getMessage()
    assert "answered UNKNOWN_SERVER_ERROR" in line.getMessage()
    assert line.exc_info is None  # one line, not a traceback


async def test_handler_crash_without_error_response_closes_connection(
    broker: EmbeddedBroker,
    client: KafkaClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Produce has no top-level error code: the connection closes, as Kafka's would."""
    monkeypatch.setattr(HANDLERS[ProduceRequest.API_KEY], "_handle", _crash)
    with pytest.raises(ProtocolError) as info:
        await client.request(ProduceRequest(acks=-1, timeout_ms=1000), 9, ProduceResponse)
    assert info.value.error == ErrorCode.NETWORK_EXCEPTION
    [line] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "closing the connection" in line.getMessage()
    other = await KafkaClient.connect(broker.bootstrap)
    try:
        response = await other.request(MetadataRequest(topics=None), 12, MetadataResponse)
        assert response.cluster_id
    finally:
        await other.aclose()


async def test_error_responses_encode_at_every_advertised_version() -> None:
    """Where an error response exists it carries UNKNOWN_SERVER_ERROR on the wire; the APIs
    with per-topic errors only (Produce, CreateTopics, ...) have none and close instead."""
    answered = set()
    for handler in HANDLERS.values():
        for version in range(handler.min_version, handler.max_version + 1):
            body = error_response(handler.api_key, version, ErrorCode.UNKNOWN_SERVER_ERROR)
            if body is None:
                continue
            answered.add(handler.module)
            again = type(body).decode(body.encode(version), version)
            assert again.error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
    assert {"fetch", "heartbeat", "join_group", "init_producer_id", "api_versions"} <= answered
    assert not {"produce", "create_topics", "list_offsets"} & answered
    assert error_response(FetchRequest.API_KEY, 6, ErrorCode.UNKNOWN_SERVER_ERROR) is None


async def test_oversized_frame_is_refused(tmp_path: Path) -> None:
    async with open_broker(tmp_path, {"socket.request.max.bytes": "1000"}) as broker:
        stream = await raw_connect(broker)
        await stream.send_all(struct.pack(">i", 50_000_000))
        assert await read_frame(stream) is None
        await stream.aclose()


async def test_pipelined_requests_are_answered_in_order(broker: EmbeddedBroker) -> None:
    stream = await raw_connect(broker)
    payload = b"".join(
        frame(RequestHeader(18, 3, corr, "p").encode(2) + ApiVersionsRequest("p", "1").encode(3))
        for corr in range(20)
    )
    await stream.send_all(payload)
    seen: list[int] = []
    buf = b""
    while len(seen) < 20:
        buf += await stream.receive_some(65536)
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
            size = struct.unpack_from(">i", buf)[0]
            seen.append(struct.unpack_from(">i", buf, 4)[0])
            buf = buf[4 + size :]
    assert seen == list(range(20))
    await stream.aclose()


class _ConnectionSteps(trio.abc.Instrument):
    """Counts the task steps of the server's connection tasks."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if "Server._connection" in task.name:
            self.steps += 1


async def test_pipelined_fetches_answered_by_sendfile_yield_between_them(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    """A client that pipelines Fetches whose records go out by sendfile does not hold the
    event loop for all of them: its connection yields after each answer, as it does for
    answers sent as bytes, so one client's burst never stalls the others."""
    await create_topic(broker, "piped")
    records = batch([bytes(SENDFILE_MIN_BYTES)])
    assert (await produce(client, "piped", records)).error_code == ErrorCode.NONE
    count = 20
    fetch = fetch_request("piped", 0).encode(12)
    steps = _ConnectionSteps()
    async with await raw_connect(broker) as stream:
        await stream.send_all(
            b"".join(
                frame(RequestHeader(1, 12, corr, "p").encode(2) + fetch) for corr in range(count)
            )
        )
        trio.lowlevel.add_instrument(steps)
        try:
            answered, buf = 0, b""
            while answered < count:
                buf += await stream.receive_some(1 << 20)
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    size = struct.unpack_from(">i", buf)[0]
                    assert size > SENDFILE_MIN_BYTES  # the records were in the answer
                    buf = buf[4 + size :]
                    answered += 1
        finally:
            trio.lowlevel.remove_instrument(steps)
    assert steps.steps >= count - 1  # a step for each answer but the last (3 without the yields)


async def _served(broker: EmbeddedBroker) -> tuple[trio.SocketStream, bool]:
    """A new raw connection, and whether the broker answers on it (False: it was closed)."""
    stream = await raw_connect(broker)
    request = RequestHeader(18, 3, 1, "limits").encode(2) + ApiVersionsRequest("p", "1").encode(3)
    try:
        await stream.send_all(frame(request))
        return stream, await read_frame(stream) is not None
    except trio.BrokenResourceError:
        return stream, False


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_an_override_sets_one_hosts_connection_limit(tmp_path: Path, host: str) -> None:
    """max.connections.per.ip.overrides gives one host its own limit, by address or by a name
    that resolves to it; other hosts keep max.connections.per.ip."""
    overrides = {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": f"{host}:2"}
    async with open_broker(tmp_path, overrides) as broker:
        results = [await _served(broker) for _ in range(3)]
        assert [ok for _, ok in results] == [True, True, False]
        for stream, _ in results:
            await stream.aclose()


async def test_max_connections_per_ip_refuses_the_connection_over_it(tmp_path: Path) -> None:
    async with open_broker(tmp_path, {"max.connections.per.ip": "1"}) as broker:
        first, served = await _served(broker)
        assert served
        second, served = await _served(broker)
        assert not served
        await second.aclose()
        await first.aclose()
        third, served = await _served(broker)  # the first is gone: room again
        assert served
        await third.aclose()


async def _answered_within(stream: trio.SocketStream, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        return await read_frame(stream) is not None
    return False


async def test_a_listeners_max_connections_holds_its_connections_in_the_backlog(
    tmp_path: Path,
) -> None:
    """listener.name.<l>.max.connections (KIP-402): at the listener's limit a new connection
    waits, unaccepted, until one closes; other listeners and the broker-wide limit are apart."""
    async with open_broker(tmp_path, {"listener.name.plaintext.max.connections": "1"}) as broker:
        first, served = await _served(broker)
        assert served
        request = RequestHeader(18, 3, 1, "held").encode(2) + ApiVersionsRequest("p", "1").encode(3)
        async with await raw_connect(broker) as second:
            await second.send_all(frame(request))
            assert not await _answered_within(second, 0.5)  # not accepted: nobody reads it
            await first.aclose()
            assert await _answered_within(second, 30)  # accepted once the slot is free


async def test_dynamic_broker_configs_reach_the_connection_limits_and_the_cleaner(
    tmp_path: Path,
) -> None:
    """max.connections.per.ip and log.cleaner.* set at runtime (kafka-configs --entity-type
    brokers) take effect on the running node, as in Kafka, not at its next start."""
    async with open_broker(tmp_path) as broker:
        cleaner, state = broker.broker.cleaner, broker.broker.state
        assert cleaner is not None
        assert state is not None
        applied = trio.Event()  # the node's subscribers run in order: its own change came first
        state.controller.subscribe(
            lambda _image: applied.set() if cleaner.settings.backoff_ms == 1234 else None
        )
        client = await KafkaClient.connect(broker.bootstrap)
        changes = [
            Alter.AlterableConfig(name="max.connections.per.ip", config_operation=0, value="1"),
            Alter.AlterableConfig(name="log.cleaner.backoff.ms", config_operation=0, value="1234"),
        ]
        altered = await client.request(
            Alter(resources=[Alter.AlterConfigsResource(4, "", configs=changes)]),
            1,
            IncrementalAlterConfigsResponse,
        )
        assert altered.responses[0].error_code == ErrorCode.NONE
        with trio.fail_after(10):
            await applied.wait()
        stream, served = await _served(broker)  # the client's connection is the one allowed
        assert not served
        await stream.aclose()
        await client.aclose()


async def test_a_dynamic_min_insync_replicas_holds_acks_all_produce(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    """min.insync.replicas raised as the cluster default at runtime refuses acks=all produce
    to a partition with fewer in-sync replicas at once, as in Kafka (it was read from the
    node's file only)."""
    await create_topic(broker, "guarded")
    assert (await produce(client, "guarded", batch())).error_code == ErrorCode.NONE
    change = Alter.AlterableConfig(name="min.insync.replicas", config_operation=0, value="2")
    altered = await client.request(
        Alter(resources=[Alter.AlterConfigsResource(4, "", configs=[change])]),
        1,
        IncrementalAlterConfigsResponse,
    )
    assert altered.responses[0].error_code == ErrorCode.NONE
    refused = await produce(client, "guarded", batch())
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert (await produce(client, "guarded", batch(), acks=1)).error_code == ErrorCode.NONE


async def test_an_override_that_does_not_resolve_limits_nothing() -> None:
    """An address limits itself; a name that does not resolve adds no address (it stays as
    written, which no peer's address equals)."""
    limits = resolve_overrides({"10.1.2.3": 5, "no-such-host.invalid": 7, "a..b": 8})
    assert limits == {"10.1.2.3": 5, "no-such-host.invalid": 7, "a..b": 8}


async def test_socket_buffer_sizes_are_set_when_configured() -> None:
    """socket.send/receive.buffer.bytes reach an accepted socket (Linux doubles the value it
    is given); -1 leaves the kernel's own sizes."""
    default = BrokerConfig.from_properties({})
    assert default.socket_send_buffer_bytes == default.socket_receive_buffer_bytes == -1
    configured = BrokerConfig.from_properties(
        {"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "32768"}
    )
    a, b = trio.socket.socketpair()
    with a, b:
        before = (a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                  a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))  # fmt: skip
        set_buffer_sizes(a, default)
        assert (a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)) == before  # fmt: skip
        set_buffer_sizes(a, configured)
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * 65536
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * 32768


async def test_shutdown_closes_idle_connections_promptly(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_broker(tmp_path) as broker:
            idle = await raw_connect(broker)
            kafka = await KafkaClient.connect(broker.bootstrap)
            await kafka.request(ApiVersionsRequest("a", "1"), 3, ApiVersionsResponse)
        assert await read_frame(idle) is None
        await idle.aclose()
        await kafka.aclose()


async def test_a_connection_idle_for_connections_max_idle_ms_is_closed(tmp_path: Path) -> None:
    """Kafka's connections.max.idle.ms: a connection that sends nothing for that long is closed
    (here within 1.1 times it); one that keeps sending requests stays open."""
    async with open_broker(tmp_path, {"connections.max.idle.ms": "400"}) as broker:
        idle = await raw_connect(broker)
        busy = await KafkaClient.connect(broker.bootstrap)
        started = trio.current_time()
        with trio.fail_after(5):
            while trio.current_time() - started < 0.8:
                await busy.request(ApiVersionsRequest("a", "1"), 3, ApiVersionsResponse)
                await trio.sleep(0.1)
            assert await read_frame(idle) is None  # closed while the other one was used
        assert trio.current_time() - started >= 0.4
        await busy.request(ApiVersionsRequest("a", "1"), 3, ApiVersionsResponse)  # still open
        await idle.aclose()
        await busy.aclose()


async def test_a_negative_connections_max_idle_ms_closes_no_idle_connection(tmp_path: Path) -> None:
    """Kafka's Selector: connections.max.idle.ms < 0 turns idle expiry off (no
    IdleExpiryManager). The broker starts and serves, and an idle connection stays open."""
    with trio.fail_after(10):
        async with open_broker(tmp_path, {"connections.max.idle.ms": "-1"}) as broker:
            idle = await raw_connect(broker)
            kafka = await KafkaClient.connect(broker.bootstrap)
            await kafka.request(ApiVersionsRequest("a", "1"), 3, ApiVersionsResponse)
            with trio.move_on_after(0.3) as still_open:
                await read_frame(idle)
            assert still_open.cancelled_caught  # nothing came, not even the end of the stream
            await kafka.request(ApiVersionsRequest("a", "1"), 3, ApiVersionsResponse)
            await idle.aclose()
            await kafka.aclose()
