"""What a broker takes from its machine: the network, the clocks, worker threads, randomness.

Broker code reaches these only through this module, so that one process can host a whole
simulated cluster (`tests/simulation`): brokers, controllers and clients on trio's virtual
clock, in memory, from one seed. Each broker's task tree runs with its own `Runtime`, held in
a context variable that every trio task inherits from the task that starts it (`running`).
A broker process runs on `SYSTEM`, the machine itself:

| need | production (`Runtime`) | a simulation replaces it with |
|---|---|---|
| listening and connecting (`network`) | trio's TCP sockets (`TcpNetwork`); TLS wraps the streams above | in-memory streams with delays, stalls, resets and partitions |
| the wall clock (`wall_clock_ms`): record timestamps, retention, expiries | `time.time_ns` | the virtual clock, skewed and drifting per node |
| the monotonic clock (`monotonic_ms`) for leases | `time.monotonic_ns` | trio's virtual clock |
| worker threads (`to_thread`): fsync, log loading, checkpoints | `trio.to_thread.run_sync` | the call, inline, after a seeded disk latency |
| randomness (`new_random`, `new_uuid`) | the operating system's entropy | the simulation's seed |

Intervals and timeouts are trio's own clock already (`trio.current_time`, `trio.sleep`,
`trio.move_on_after`), which a simulation replaces with `trio.testing.MockClock`. Storage's
file I/O has its own switch, `strom.storage.disk`. A test (`tests/simulation/test_contract.py`)
keeps broker code from calling around this module.
"""

from __future__ import annotations

import abc
import contextlib
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar, TypeVarTuple

import trio

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

StreamListener = trio.abc.Listener[trio.abc.Stream]


class Network(abc.ABC):
    """Where a node listens and what it connects to (plain byte streams; TLS goes on top)."""

    @abc.abstractmethod
    async def listen(self, host: str, port: int) -> list[StreamListener]:
        """Bind and listen on `host:port` (port 0: any free port; host "": every address).
        OSError as the kernel gives it (EADDRINUSE, ...)."""

    @abc.abstractmethod
    def bound_port(self, listener: StreamListener) -> int:
        """The port `listener` got (the real one when 0 was asked)."""

    @abc.abstractmethod
    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        """A connection to `host:port`; OSError when refused or unreachable."""

    @abc.abstractmethod
    def peer_host(self, stream: trio.abc.Stream) -> str:
        """The address of the other end of an accepted `stream` ("?" if unknown)."""


class TcpNetwork(Network):
    """The machine's TCP/IP stack, through trio."""

    async def listen(self, host: str, port: int) -> list[StreamListener]:
        return list(await trio.open_tcp_listeners(port, host=host or None))

    def bound_port(self, listener: StreamListener) -> int:
        assert isinstance(listener, trio.SocketListener)
        return int(listener.socket.getsockname()[1])

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        return await trio.open_tcp_stream(host, port)

    def peer_host(self, stream: trio.abc.Stream) -> str:
        if not isinstance(stream, trio.SocketStream):
            return "?"
        try:
            peer = stream.socket.getpeername()
        except OSError:
            return "?"
        return str(peer[0]) if isinstance(peer, tuple) else str(peer)


class Runtime:
    """The machine a broker runs on; this class is the real one (`SYSTEM`), and a simulation
    subclasses it per node."""

    def __init__(self, network: Network | None = None) -> None:
        self.network: Network = network or TcpNetwork()
        self.random = random.Random()
        """For occasional choices (a Metadata answer's controller id); a component that draws
        often takes its own (`new_random`)."""

    def wall_clock_ms(self) -> int:
        """Milliseconds since the epoch: record timestamps, retention, expiries."""
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        """A clock that never jumps, in milliseconds (leases: a wall-clock step must not expire
        or extend them)."""
        return time.monotonic_ns() // 1_000_000

    async def to_thread(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """Run blocking `fn(*args)` (disk I/O) off the event loop."""
        return await trio.to_thread.run_sync(fn, *args)

    def new_random(self) -> random.Random:
        """A new random generator (election timeouts, session ids, choices)."""
        return random.Random()

    def new_uuid(self) -> uuid.UUID:
        """A random (version 4) UUID: topic ids, incarnation ids, member ids."""
        return uuid.uuid4()


SYSTEM = Runtime()
"""The real machine: what every broker process runs on."""

_current: ContextVar[Runtime] = ContextVar("strom_runtime", default=SYSTEM)
_replaced = False
"""Whether any task ever ran on another runtime: until then (always, in a broker process) the
functions below skip the context variable and cost what the calls they wrap cost."""


def current() -> Runtime:
    """The runtime of the task that asks (SYSTEM unless a simulation set one)."""
    return _current.get() if _replaced else SYSTEM


@contextlib.contextmanager
def running(runtime: Runtime) -> Iterator[None]:
    """Run this task, and every task it starts from now on, on `runtime`."""
    global _replaced
    _replaced = True
    token = _current.set(runtime)
    try:
        yield
    finally:
        _current.reset(token)


def wall_clock_ms() -> int:
    """The current runtime's wall clock, in milliseconds since the epoch."""
    if not _replaced:
        return time.time_ns() // 1_000_000
    return _current.get().wall_clock_ms()


def monotonic_ms() -> int:
    """The current runtime's monotonic clock, in milliseconds."""
    if not _replaced:
        return time.monotonic_ns() // 1_000_000
    return _current.get().monotonic_ms()


async def to_thread(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """Run blocking `fn(*args)` in the current runtime's worker (a thread, in production)."""
    if not _replaced:
        return await trio.to_thread.run_sync(fn, *args)
    return await _current.get().to_thread(fn, *args)


def new_random() -> random.Random:
    return current().new_random()


async def send_all(stream: trio.abc.Stream, data: bytes | bytearray | memoryview) -> None:
    """`stream.send_all(data)`; on a plain TCP stream without trio's schedule point when the
    kernel takes every byte at once (a small request or response: the usual case), so a caller
    must reach one soon after (its next receive). trio's wrappers cost a request and its
    answer a task switch and two generator context managers each way."""
    if type(stream) is not trio.SocketStream:  # TLS, a simulation's in-memory streams
        await stream.send_all(data)
        return
    sock = stream.socket
    await trio.lowlevel.checkpoint_if_cancelled()
    view = memoryview(data).cast("B")
    while view:
        try:
            sent = os.write(sock.fileno(), view)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except InterruptedError:
            continue
        except OSError as exc:  # closed here (EBADF), reset or gone there (EPIPE, ECONNRESET)
            raise trio.BrokenResourceError(exc) from exc
        view = view[sent:]


async def receive_some(stream: trio.abc.Stream, max_bytes: int) -> bytes | bytearray:
    """`stream.receive_some(max_bytes)` (b"" at end of stream), with trio's schedule points
    (one when bytes were waiting, the wait itself otherwise) but without its wrappers."""
    if type(stream) is not trio.SocketStream:
        return await stream.receive_some(max_bytes)
    sock = stream.socket
    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        data = os.read(sock.fileno(), max_bytes)
    except BlockingIOError:
        pass
    except OSError as exc:
        raise trio.BrokenResourceError(exc) from exc
    else:
        await trio.lowlevel.cancel_shielded_checkpoint()
        return data
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            return os.read(sock.fileno(), max_bytes)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(exc) from exc


def new_uuid() -> uuid.UUID:
    return current().new_uuid()
