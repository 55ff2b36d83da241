"""broker/send.py: response chunks with file ranges sent by sendfile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from strom.broker.data.file_chunk import FileChunk
from strom.broker.network.send import has_file_chunks, send_chunks
from strom.storage import ReadResult
from strom.storage.fileio import SegmentFile

pytestmark = pytest.mark.trio


def _range(path: Path, data: bytes, position: int, size: int) -> ReadResult:
    path.write_bytes(data)
    file = SegmentFile(path, os.O_RDONLY)
    return ReadResult(file, position, size, 0, 0, 0, 0)


async def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    return trio.SocketStream(a), trio.SocketStream(b)


async def _receive(stream: trio.SocketStream, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        data = await stream.receive_some(1 << 16)
        if not data:
            break
        out += data
    return bytes(out)


async def test_chunks_and_file_ranges_arrive_in_order(tmp_path: Path) -> None:
    data = os.urandom(4 << 20)  # far beyond the socket buffer: partial sends and EAGAIN
    result = _range(tmp_path / "0.log", data, 1000, len(data) - 2000)
    chunks = [b"head", memoryview(b"-er"), FileChunk(result), b"mid", FileChunk(result), b"tail"]
    assert has_file_chunks(chunks)
    assert not has_file_chunks([b"x"])
    expected = b"head-er" + data[1000:-1000] + b"mid" + data[1000:-1000] + b"tail"
    sender, receiver = await _pair()
    got = b""

    async def read() -> None:
        nonlocal got
        got = await _receive(receiver, len(expected))

    async with sender, receiver, trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await send_chunks(sender, chunks)
    assert got == expected
    assert len(FileChunk(result)) == len(data) - 2000


async def test_a_truncated_file_breaks_the_stream(tmp_path: Path) -> None:
    result = _range(tmp_path / "0.log", b"x" * 100, 50, 100)  # 50 bytes short
    sender, receiver = await _pair()
    async with sender, receiver:
        with pytest.raises(trio.BrokenResourceError):
            await send_chunks(sender, [b"h", FileChunk(result)])
        assert await _receive(receiver, 51) == b"h" + b"x" * 50


async def test_a_file_closed_at_shutdown_breaks_the_stream(tmp_path: Path) -> None:
    result = _range(tmp_path / "0.log", b"x" * 100, 0, 100)
    assert result.file is not None
    result.file.close()
    sender, receiver = await _pair()
    async with sender, receiver:
        with pytest.raises(trio.BrokenResourceError):
            await send_chunks(sender, [FileChunk(result)])
