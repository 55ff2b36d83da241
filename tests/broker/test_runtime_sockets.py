"""`runtime.send_all` and `runtime.receive_some`: trio's stream semantics on plain TCP sockets
(every byte in order, end of stream, errors as BrokenResourceError, cancellation) with fewer
schedule points, and other streams passed through."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from strom.broker import runtime

pytestmark = pytest.mark.trio


def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    return trio.SocketStream(a), trio.SocketStream(b)


async def _drain(stream: trio.abc.Stream, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        data = await runtime.receive_some(stream, 1 << 16)
        if not data:
            break
        out += data
    return bytes(out)


async def test_a_large_send_waits_for_room_and_arrives_whole() -> None:
    data = os.urandom(8 << 20)  # far beyond the socket buffers: EAGAIN, partial writes
    sender, receiver = _pair()
    got = b""

    async def read() -> None:
        nonlocal got
        got = await _drain(receiver, len(data))

    async with sender, receiver, trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await runtime.send_all(sender, memoryview(bytearray(data)))
    assert got == data


async def test_a_small_send_takes_no_schedule_point() -> None:
    sender, receiver = _pair()
    ran = False

    async def other() -> None:
        nonlocal ran
        ran = True

    async with sender, receiver, trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await runtime.send_all(sender, b"request")
        assert not ran  # no other task ran during the send
        assert await runtime.receive_some(receiver, 100) == b"request"


async def test_end_of_stream_and_a_closed_peer() -> None:
    sender, receiver = _pair()
    await sender.send_eof()
    assert await runtime.receive_some(receiver, 100) == b""
    await sender.aclose()

    async def write_on() -> None:
        for _ in range(100):  # the first writes may land in the buffer before the reset
            await runtime.send_all(receiver, b"x" * 65536)

    with pytest.raises(trio.BrokenResourceError):
        await write_on()
    await receiver.aclose()
    with pytest.raises(trio.BrokenResourceError):
        await runtime.send_all(receiver, b"x")  # closed here


async def test_a_waiting_receive_is_cancellable() -> None:
    sender, receiver = _pair()
    async with sender, receiver:
        with trio.move_on_after(0.05) as scope:
            await runtime.receive_some(receiver, 100)
        assert scope.cancelled_caught
        with trio.CancelScope() as cancelled:
            cancelled.cancel()
            await runtime.send_all(sender, b"x")  # a cancelled send raises before writing
        assert cancelled.cancelled_caught
        await sender.send_all(b"late")
        assert await runtime.receive_some(receiver, 100) == b"late"  # nothing was written


async def test_other_streams_use_their_own_methods() -> None:
    left, right = trio.testing.memory_stream_pair()
    await runtime.send_all(left, b"in memory")
    assert await runtime.receive_some(right, 100) == b"in memory"
