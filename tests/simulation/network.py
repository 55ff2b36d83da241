"""The simulated network: in-memory TCP connections between named hosts, with the faults real
networks inflict on Kafka's connections.

What is modelled is what a broker or client can observe through TCP, not packets:

- **Streams stay streams.** Bytes of one connection arrive in order, exactly once, maybe split
  into several reads; nothing inside a connection is lost, duplicated or reordered (TCP does
  not let that through). Each direction of a connection is a `_Pipe` of timestamped chunks.
- **Latency** per chunk, per link, from the link's profile (a base and jitter, a heavy tail);
  independent per connection, so messages on different connections overtake each other
  (reordering across connections: a Fetch answer overtaking a produce's acknowledgement).
- **Partitions**, also one-way: a cut link (`cut(src, dst)`) holds every byte sent over it,
  as a dropped route does while TCP retransmits; they arrive once it heals (if the
  connection still exists by then). Connecting across a cut hangs (the SYN is lost) until it
  heals or the caller's timeout fires. A cut may name a port (`cut(src, dst, port=9092)`):
  it then holds only the bytes of connections to that port (a firewall rule on the brokers'
  replication listener that spares the controllers' quorum, or the reverse).
- **Stalls**: a link holds its bytes until a moment in the future (a congested switch, a
  paused VM's network, a long GC pause as the peer sees it).
- **Connection resets**: both ends get a reset (as a middlebox or a peer's kernel sends RST):
  what was in flight is lost and the next read or write fails. A request whose connection
  resets after it arrived but before its answer did is retried by the client on a new
  connection: that is how real networks duplicate requests.
- **Crashed hosts**: a process killed (`crash_host`) resets its connections as its kernel
  closes them; a host powered off (`power_off`) answers nothing and its peers wait for their
  own timeouts; a host that comes back refuses connections to ports it does not listen on and
  resets connections of its previous life.

Everything random comes from the `random.Random` given, so a seed replays the same traffic.
Every chunk delivered goes into the trace's hash (sender, receiver, time, length, CRC).
"""

from __future__ import annotations

import errno
import itertools
import math
import random
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from strom.broker.runtime import Network, StreamListener

Host = str

INF = math.inf


@dataclass
class LinkProfile:
    """How a link delays bytes, in seconds."""

    base: float = 0.0002
    jitter: float = 0.0005
    tail: float = 0.01
    """A chunk now and then (`tail_chance`) takes up to this much longer."""
    tail_chance: float = 0.02

    def delay(self, rng: random.Random) -> float:
        extra = rng.random() * self.tail if rng.random() < self.tail_chance else 0.0
        return self.base + rng.random() * self.jitter + extra


@dataclass
class _Chunk:
    data: bytes
    at: float
    """When it arrives (inf: held by a cut link)."""
    kind: int = 0
    """0: data; 1: end of stream (FIN); 2: reset (RST)."""


DATA, EOF, RESET = 0, 1, 2


class _Pipe:
    """One direction of a connection: what `src` sent and `dst` has yet to read, in order."""

    def __init__(self, net: SimNetwork, conn: _Connection, src: Host, dst: Host) -> None:
        self.net = net
        self.conn = conn
        self.src = src
        self.dst = dst
        self.chunks: deque[_Chunk] = deque()
        self.last_at = 0.0
        self.changed = trio.Event()
        self.sent_eof = False
        self.reset = False
        self.reader: SimStream | None = None

    def push(self, data: bytes, kind: int = DATA) -> None:
        now = trio.current_time()
        at = self.net.arrival(self.src, self.dst, now, self.conn.port)
        at = max(at, self.last_at)  # in order: a chunk never overtakes the one before it
        self.last_at = at if at < INF else self.last_at
        self.chunks.append(_Chunk(data, at, kind))
        self._wake()

    def reschedule(self, now: float) -> None:
        """The link's state changed (healed, stalled): recompute held chunks' arrivals."""
        last = 0.0
        for chunk in self.chunks:
            if chunk.at == INF:
                chunk.at = self.net.arrival(self.src, self.dst, now, self.conn.port)
            if chunk.at < last:
                chunk.at = last
            last = chunk.at if chunk.at < INF else last
        self.last_at = max(self.last_at, last)
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


class _Connection:
    def __init__(self, net: SimNetwork, conn_id: int, client: Host, server: Host, port: int) -> None:
        self.id = conn_id
        self.client = client
        self.server = server
        self.port = port
        self.to_server = _Pipe(net, self, client, server)
        self.to_client = _Pipe(net, self, server, client)

    def __repr__(self) -> str:
        return f"conn{self.id}({self.client}->{self.server}:{self.port})"


class SimStream(trio.abc.Stream):
    """One end of a simulated connection."""

    def __init__(
        self, net: SimNetwork, conn: _Connection, incoming: _Pipe, outgoing: _Pipe, owner: _Life
    ) -> None:
        self.net = net
        self.conn = conn
        self.incoming = incoming
        self.outgoing = outgoing
        self.owner = owner
        self.peer: Host = outgoing.dst
        incoming.reader = self
        self._buffer = bytearray()
        self._closed = False
        self._broken = False
        self._eof = False

    def _check_send(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        if self._broken or self.outgoing.reset or not self.owner.alive:
            raise trio.BrokenResourceError(f"{self.conn} was reset")
        if self.outgoing.sent_eof:
            raise trio.ClosedResourceError("send after the end of the stream")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self._check_send()
        payload = bytes(data)
        if payload:
            reader = self.outgoing.reader
            if reader is not None and reader._closed and not self.incoming.reset:
                # the peer closed its end: its kernel answers with a reset
                self.incoming.reset = True
                self.incoming.push(b"", RESET)
            self.net.split_and_push(self.outgoing, payload)
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        self._check_send()
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        while True:
            if not self.owner.alive:
                raise trio.BrokenResourceError(f"{self.conn}: this host is gone")
            if self._buffer:
                size = len(self._buffer) if max_bytes is None else min(max_bytes, len(self._buffer))
                out = bytes(self._buffer[:size])
                del self._buffer[:size]
                await trio.lowlevel.checkpoint()
                return out
            if self._eof:
                await trio.lowlevel.checkpoint()
                return b""
            if self._broken:
                raise trio.BrokenResourceError(f"{self.conn} was reset")
            pipe = self.incoming
            now = trio.current_time()
            while pipe.chunks and pipe.chunks[0].at <= now:
                chunk = pipe.chunks.popleft()
                if chunk.kind == DATA:
                    self.net.delivered(pipe, chunk, now)
                    self._buffer += chunk.data
                elif chunk.kind == EOF:
                    self._eof = True
                    break
                else:
                    self._broken = True
                    pipe.chunks.clear()
                    break
            if self._buffer or self._eof or self._broken:
                continue
            changed = pipe.changed
            deadline = pipe.chunks[0].at if pipe.chunks else INF
            with trio.move_on_at(deadline):
                await changed.wait()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if self.owner.alive and not self._broken and not self.outgoing.sent_eof and not self.outgoing.reset:
                self.outgoing.sent_eof = True
                self.outgoing.push(b"", EOF)
            self.incoming.chunks.clear()
            self.net.closed(self)
        await trio.lowlevel.checkpoint()

    def reset_now(self) -> None:
        """This end is gone at once (its host crashed): the peer gets a reset."""
        if not self._closed:
            self._closed = True
            if not self.outgoing.reset:
                self.outgoing.reset = True
                self.outgoing.push(b"", RESET)
            self.net.closed(self)


class SimListener(trio.abc.Listener[trio.abc.Stream]):
    def __init__(self, net: SimNetwork, host: Host, port: int, owner: _Life) -> None:
        self.net = net
        self.host = host
        self.port = port
        self.owner = owner
        self.send, self.receive = trio.open_memory_channel[SimStream](math.inf)
        self.closed = False

    async def accept(self) -> trio.abc.Stream:
        if self.closed:
            raise trio.ClosedResourceError("the listener was closed")
        try:
            return await self.receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.ClosedResourceError("the listener was closed") from None

    async def aclose(self) -> None:
        self.net.unlisten(self)
        await trio.lowlevel.checkpoint()


@dataclass
class _Life:
    """One incarnation of a process on a host: its sockets die with it."""

    host: Host
    alive: bool = True
    streams: set[SimStream] = field(default_factory=set)
    listeners: list[SimListener] = field(default_factory=list)


class SimNetwork:
    """Every host's connections, on one clock and one random generator."""

    def __init__(
        self,
        rng: random.Random,
        trace: Callable[[str], None],
        digest: Callable[[bytes], None],
        *,
        split_chance: float = 0.2,
    ) -> None:
        self.rng = rng
        self.trace = trace
        self.digest = digest
        self.split_chance = split_chance
        self.profiles: dict[tuple[Host, Host], LinkProfile] = {}
        self.default_profile = LinkProfile()
        self.cuts: set[tuple[Host, Host]] = set()
        self.port_cuts: set[tuple[Host, Host, int]] = set()
        """(source, destination, server port): the bytes between them on connections to that port."""
        self.stalled_until: dict[tuple[Host, Host], float] = {}
        self.listeners: dict[tuple[Host, int], SimListener] = {}
        self.connections: dict[int, _Connection] = {}
        self.ends: dict[int, list[SimStream]] = {}
        self.powered_off: set[Host] = set()
        self._ids = itertools.count(1)
        self._next_port: dict[Host, int] = {}
        self.changed = trio.Event()
        self.stats = {"chunks": 0, "bytes": 0, "connects": 0, "refused": 0, "resets": 0}

    # --- the link model ---------------------------------------------------------------------

    def arrival(self, src: Host, dst: Host, now: float, port: int | None = None) -> float:
        if (src, dst) in self.cuts or dst in self.powered_off or src in self.powered_off:
            return INF
        if port is not None and (src, dst, port) in self.port_cuts:
            return INF
        at = now + self.profiles.get((src, dst), self.default_profile).delay(self.rng)
        stall = self.stalled_until.get((src, dst))
        if stall is not None:
            if stall <= now:
                del self.stalled_until[(src, dst)]
            else:
                at = max(at, stall)
        return at

    def reachable(self, src: Host, dst: Host, port: int | None = None) -> bool:
        if port is not None and ((src, dst, port) in self.port_cuts or (dst, src, port) in self.port_cuts):
            return False
        return (src, dst) not in self.cuts and (dst, src) not in self.cuts and not (
            {src, dst} & self.powered_off
        )

    def split_and_push(self, pipe: _Pipe, payload: bytes) -> None:
        """Send `payload`, now and then split in two (TCP segments arriving apart)."""
        if len(payload) > 1 and self.rng.random() < self.split_chance:
            cut = self.rng.randrange(1, len(payload))
            pipe.push(payload[:cut])
            pipe.push(payload[cut:])
        else:
            pipe.push(payload)

    def delivered(self, pipe: _Pipe, chunk: _Chunk, now: float) -> None:
        self.stats["chunks"] += 1
        self.stats["bytes"] += len(chunk.data)
        self.digest(
            f"{now:.6f} {pipe.conn.id} {pipe.src}>{pipe.dst} {len(chunk.data)} "
            f"{zlib.crc32(chunk.data)}".encode()
        )

    # --- faults ---------------------------------------------------------------------------

    def _relink(self) -> None:
        now = trio.current_time()
        for conn in self.connections.values():
            conn.to_server.reschedule(now)
            conn.to_client.reschedule(now)
        self.changed.set()
        self.changed = trio.Event()

    def cut(self, sources: set[Host], destinations: set[Host], port: int | None = None) -> None:
        """Bytes from `sources` to `destinations` are held (one way); with `port`, only on
        connections to that port (either end may be the server)."""
        for src in sources:
            for dst in destinations:
                if src != dst:
                    if port is None:
                        self.cuts.add((src, dst))
                    else:
                        self.port_cuts.add((src, dst, port))

    def heal(
        self,
        sources: set[Host] | None = None,
        destinations: set[Host] | None = None,
        port: int | None = None,
    ) -> None:
        """Carry bytes again on the cut links between these hosts (every link, every port:
        None); with `port`, only the cuts made for that port."""
        if sources is None or destinations is None:
            self.cuts.clear()
            self.port_cuts.clear()
        elif port is None:
            self.cuts -= {(s, d) for s in sources for d in destinations}
        else:
            self.port_cuts -= {(s, d, port) for s in sources for d in destinations}
        self._relink()

    def stall(self, src: Host, dst: Host, until: float) -> None:
        self.stalled_until[(src, dst)] = max(until, self.stalled_until.get((src, dst), 0.0))
        self._relink()

    def reset(self, conn_id: int) -> None:
        """Both ends of a connection get a reset: in-flight bytes are lost."""
        conn = self.connections.get(conn_id)
        if conn is None:
            return
        self.stats["resets"] += 1
        for pipe in (conn.to_server, conn.to_client):
            pipe.chunks.clear()
            pipe.last_at = 0.0
            pipe.reset = True
            pipe.push(b"", RESET)

    def live_connections(self, host: Host | None = None) -> list[int]:
        return sorted(
            cid
            for cid, conn in self.connections.items()
            if host is None or host in (conn.client, conn.server)
        )

    def crash_host(self, life: _Life) -> None:
        """The process of `life` is killed: its kernel resets its connections, its ports close."""
        life.alive = False
        for listener in list(life.listeners):
            self.unlisten(listener)
        for stream in sorted(life.streams, key=lambda s: s.conn.id):
            stream.reset_now()
        life.streams.clear()

    def power_off(self, host: Host) -> None:
        self.powered_off.add(host)

    def power_on(self, host: Host) -> None:
        """The host is back: what was sent to its previous life gets a reset."""
        self.powered_off.discard(host)
        for conn in list(self.connections.values()):
            for stream in self.ends.get(conn.id, []):
                if stream.owner.host == host and not stream.owner.alive:
                    stream.reset_now()
        self._relink()

    # --- sockets ----------------------------------------------------------------------------

    def closed(self, stream: SimStream) -> None:
        stream.owner.streams.discard(stream)
        ends = self.ends.get(stream.conn.id)
        if ends is not None and all(end._closed for end in ends):
            del self.ends[stream.conn.id]
            self.connections.pop(stream.conn.id, None)

    def listen(self, life: _Life, port: int) -> SimListener:
        host = life.host
        if port == 0:
            port = self._next_port.get(host, 40000)
            self._next_port[host] = port + 1
        if (host, port) in self.listeners:
            raise OSError(errno.EADDRINUSE, f"{host}:{port} is in use")
        listener = SimListener(self, host, port, life)
        self.listeners[(host, port)] = listener
        life.listeners.append(listener)
        return listener

    def unlisten(self, listener: SimListener) -> None:
        if not listener.closed:
            listener.closed = True
            if self.listeners.get((listener.host, listener.port)) is listener:
                del self.listeners[(listener.host, listener.port)]
            if listener in listener.owner.listeners:
                listener.owner.listeners.remove(listener)
            listener.send.close()
            # connections accepted by the kernel but never by the process: reset
            while True:
                try:
                    stream = listener.receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                stream.reset_now()

    async def connect(self, life: _Life, host: Host, port: int) -> SimStream:
        src = life.host
        self.stats["connects"] += 1
        while not self.reachable(src, host, port):  # the SYN is lost until the link heals
            await self.changed.wait()
        await trio.sleep(self.arrival(src, host, trio.current_time(), port) - trio.current_time())
        listener = self.listeners.get((host, port))
        if not life.alive:
            raise OSError(errno.ECONNABORTED, "this process is gone")
        if listener is None or listener.closed:
            self.stats["refused"] += 1
            await trio.sleep(self.arrival(host, src, trio.current_time(), port) - trio.current_time())
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"{host}:{port} refused the connection")
        conn = _Connection(self, next(self._ids), src, host, port)
        self.connections[conn.id] = conn
        server_end = SimStream(self, conn, conn.to_server, conn.to_client, listener.owner)
        client_end = SimStream(self, conn, conn.to_client, conn.to_server, life)
        self.ends[conn.id] = [client_end, server_end]
        listener.owner.streams.add(server_end)
        life.streams.add(client_end)
        listener.send.send_nowait(server_end)
        # the SYN-ACK comes back
        back = self.arrival(host, src, trio.current_time(), port)
        if back == INF:
            while not self.reachable(src, host, port):
                await self.changed.wait()
            back = self.arrival(host, src, trio.current_time(), port)
        await trio.sleep(back - trio.current_time())
        if client_end._broken or client_end._closed:
            raise ConnectionResetError(errno.ECONNRESET, f"{conn} was reset while connecting")
        return client_end


class NodeNetwork(Network):
    """The `strom.broker.runtime.Network` of one process on a simulated host."""

    def __init__(self, net: SimNetwork, life: _Life) -> None:
        self.net = net
        self.life = life

    async def listen(self, host: str, port: int) -> list[StreamListener]:
        if not self.life.alive:
            raise OSError(errno.EBADF, "this process is gone")
        listener = self.net.listen(self.life, port)
        await trio.lowlevel.checkpoint()
        return [listener]

    def bound_port(self, listener: StreamListener) -> int:
        assert isinstance(listener, SimListener)
        return listener.port

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        if not self.life.alive:
            raise OSError(errno.ECONNABORTED, "this process is gone")
        return await self.net.connect(self.life, host, port)

    def peer_host(self, stream: trio.abc.Stream) -> str:
        return stream.peer if isinstance(stream, SimStream) else "?"


def new_life(host: Host) -> _Life:
    return _Life(host)
