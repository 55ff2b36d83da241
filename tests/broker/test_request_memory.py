"""Request memory is bounded broker-wide (`queued.max.request.bytes`); connections by `max.connections`."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from strom.broker.network.memory_pool import RequestMemoryPool
from strom.broker.testing.embedded import BrokerProcess
from strom.wire.connection import NEED_DATA, ClientConnection, Connection
from strom.wire.messages.api_versions import ApiVersionsRequest

MIB = 1024 * 1024


def test_pending_frame_size_is_known_once_the_prefix_is_in() -> None:
    conn = Connection(max_frame_size=10 * MIB)
    assert conn.pending_frame_size() is None
    conn.receive_data(b"\x00\x00")
    assert conn.next_event() is NEED_DATA
    assert conn.pending_frame_size() is None
    conn.receive_data(struct.pack(">H", 100) + b"x" * 10)
    assert conn.next_event() is NEED_DATA
    assert conn.pending_frame_size() == 104


@pytest.mark.trio
async def test_a_spent_pool_makes_reading_wait_until_memory_comes_back() -> None:
    pool = RequestMemoryPool(100)
    await pool.reserve(60)
    await pool.reserve(60)  # non-strict, as Kafka's: granted while anything is left
    assert pool.available == -20
    granted = trio.Event()

    async def third() -> None:
        await pool.reserve(10)
        granted.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(third)
        await trio.testing.wait_all_tasks_blocked()
        assert not granted.is_set()
        pool.release(60)
        await granted.wait()
    assert pool.available == 30


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def bounded_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    overrides = {"socket.request.max.bytes": str(16 * MIB), "queued.max.request.bytes": str(16 * MIB)}
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        yield broker


def _send_partial_frame(bootstrap: str, declared: int, body: int, stop: threading.Event) -> None:
    """Declare a frame of `declared` bytes and send `body` of them, then hold the socket open."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(0.2)
        pending = memoryview(struct.pack(">i", declared) + b"\x00" * body)
        while pending and not stop.is_set():
            try:
                sent = sock.send(pending[: 1 << 20])
            except TimeoutError:
                continue  # the broker stopped reading this connection
            pending = pending[sent:]
        stop.wait(60)


def test_ten_slow_large_requests_hold_no_more_than_the_pool(bounded_broker: BrokerProcess) -> None:
    """The robustness probe: ten clients each send 12 MiB of a declared 16 MiB frame and stall.

    Unbounded, the broker would buffer all ten (120 MiB); with a 16 MiB pool, only the frames
    that got a reservation are read (pool + one frame), the rest wait in the kernel's buffers.
    """
    assert bounded_broker.process is not None
    pid = bounded_broker.process.pid
    before = _rss_bytes(pid)
    stop = threading.Event()
    senders = [
        threading.Thread(
            target=_send_partial_frame, args=(bounded_broker.bootstrap, 16 * MIB, 12 * MIB, stop)
        )
        for _ in range(10)
    ]
    for sender in senders:
        sender.start()
    try:
        # wait until the broker's memory stops growing: it has read all it is going to read
        deadline = time.monotonic() + 60
        samples = [_rss_bytes(pid)]
        while time.monotonic() < deadline:
            time.sleep(0.5)
            samples.append(_rss_bytes(pid))
            if len(samples) >= 6 and max(samples[-6:]) - min(samples[-6:]) < MIB:
                break
        grown = max(samples) - before
        assert grown < 48 * MIB, f"broker RSS grew by {grown // MIB} MiB"
        assert bounded_broker.process.poll() is None
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=30)


def test_max_connections_stops_accepting_until_one_closes(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", {"max.connections": "2"}) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        first = socket.create_connection((host, int(port)))
        second = socket.create_connection((host, int(port)))
        third = socket.create_connection((host, int(port)))  # completes in the listen backlog
        api_versions = ClientConnection().send_request(ApiVersionsRequest(), 0)
        try:
            third.settimeout(1.0)
            third.sendall(api_versions)
            with pytest.raises(TimeoutError):
                third.recv(4)  # not accepted: nobody reads it
            first.close()
            third.settimeout(30)
            assert len(third.recv(4)) == 4  # accepted once a slot freed, and answered
        finally:
            for sock in (first, second, third):
                sock.close()
