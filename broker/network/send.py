"""Writing response chunks to a socket, with file ranges sent by `os.sendfile`.

`wire.encode_response` returns a list of chunks: bytes-like objects, and for a
Fetch response possibly `FileChunk`s, opaque records values that carry a
segment's file range (a `ReadResult`) instead of its bytes. `send_chunks`
writes them in order to a plain socket: the bytes between file ranges go out with one `send`
each (joined), and each file range goes
straight from the page cache into the socket with `os.sendfile`, non-blocking,
waiting with trio's `wait_writable` on EAGAIN and looping on partial sends. Neither yields to
other tasks when the kernel takes everything at once (`runtime.send_all`): the caller reaches a
schedule point soon after (its next receive, or a checkpoint of its own between pipelined
requests).

The frame's size prefix was computed from the ranges' sizes, so a range that
cannot be sent whole (the file was truncated or closed at shutdown meanwhile)
leaves the stream unusable: that raises `trio.BrokenResourceError` and the
connection is closed, as it would be on any send error.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import trio

from strom.broker import runtime
from strom.broker.data.file_chunk import FileChunk
from strom.storage import ReadResult, disk


def has_file_chunks(chunks: list[Any]) -> bool:
    return FileChunk in map(type, chunks)


async def send_chunks(stream: trio.SocketStream, chunks: list[Any]) -> None:
    """Write `chunks` in order; FileChunks by sendfile (see the module docstring)."""
    pending: list[Any] = []
    for chunk in chunks:
        if type(chunk) is not FileChunk:
            pending.append(chunk)
            continue
        if pending:
            await runtime.send_all(stream, b"".join(pending))
            pending = []
        await _sendfile(stream.socket, chunk.result)
    if pending:
        await runtime.send_all(stream, b"".join(pending))


COPY_SLICE = 1024 * 1024
"""Bytes of a file range read and sent at a time where sendfile cannot be used (TLS)."""
INLINE_READ = 256 * 1024
"""Ranges up to this size are read on the event loop (from the page cache, as Kafka's network
thread reads them for TLS); larger ones in a worker thread."""


async def send_copied(stream: trio.abc.Stream, chunks: list[Any]) -> None:
    """Write `chunks` in order through `stream` (a TLS stream, or a simulation's in-memory one),
    reading file ranges into memory a slice at a time (through `strom.storage.disk`), so a large
    fetch response costs at most `COPY_SLICE` of extra memory."""
    pending: list[Any] = []
    for chunk in chunks:
        if type(chunk) is not FileChunk:
            pending.append(chunk)
            continue
        result = chunk.result
        position, left = result.position, result.size
        while left:
            size = min(left, COPY_SLICE)
            if size <= INLINE_READ:
                data = _read_range(result, position, size)
            else:
                data = await runtime.to_thread(_read_range, result, position, size)
            pending.append(data)
            await stream.send_all(b"".join(pending))
            pending = []
            position += size
            left -= size
    if pending:
        await stream.send_all(b"".join(pending))


def _read_range(result: ReadResult, position: int, size: int) -> bytes:
    file = result.file
    if file is None or file.closed:
        raise trio.BrokenResourceError(f"segment file closed before {size} bytes were sent")
    out = bytearray()
    while len(out) < size:
        data = disk.pread(file.fd, size - len(out), position + len(out))
        if not data:
            raise trio.BrokenResourceError(f"segment file ended {size - len(out)} bytes short")
        out += data
    return bytes(out)


async def _sendfile(sock: trio.socket.SocketType, result: ReadResult) -> None:
    file = result.file
    out = sock.fileno()
    position, left = result.position, result.size
    while left:
        await trio.lowlevel.checkpoint_if_cancelled()
        if file is None or file.closed:
            raise trio.BrokenResourceError(f"segment file closed before {left} bytes were sent")
        try:
            sent = os.sendfile(out, file.fd, position, left)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            raise trio.BrokenResourceError(exc) from exc
        if sent == 0:
            raise trio.BrokenResourceError(f"segment file ended {left} bytes short (truncated)")
        position += sent
        left -= sent
