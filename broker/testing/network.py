"""Network partitions between the nodes of a test cluster, by a proxy in front of every listener.

Why proxies and not network namespaces: namespaces need CAP_NET_ADMIN (root, or a container
that grants it), and a partition inside them needs either iptables/nftables or a bridge and veth
pairs per node plus a route from the test process into every namespace, so that its clients (and
stock tools) still reach every node. That is a lot of host state to create and clean up on a
shared 2-core CI machine, and CI containers often lack the capability. A proxy needs nothing: it
runs in the test process, on loopback, on ports the kernel chooses (port 0), and works the same
for an unprivileged developer, in CI, and as root.

How: every node listener (client and controller) gets a *front*: a socket of this process on
127.0.0.1 port 0. The node's `advertised.listeners` and every node's `controller.quorum.voters`
name the fronts, so every connection a node makes to another node (Raft votes and fetches, the
broker's registration and heartbeats to the active controller, forwarded requests, replica
fetches from a partition leader) and every client connection goes through the front of the
node it reaches. The front forwards bytes to the node's real listening socket.

Who is connecting: a front sees a connection from 127.0.0.1 and some port. It looks that port up
in /proc/net/tcp (the socket's inode) and the inode among each node's open descriptors
(/proc/<pid>/fd), which names the node that made the connection: no configuration of the node,
and no per-source addresses, are needed. A connection from anything that is not a node (the
test's own clients, kcat, a Java tool) is an *outsider*: it is never cut, as a client that can
reach every side of a partition (the tests decide whom they talk to).

What a cut does: `cut(a, b)` stops bytes from node a to node b, as a dropped link does: they
are held, not lost and not refused. Bytes already read stay in the proxy; the proxy stops
reading, so the sender's socket buffers fill and its writes stall, and the receiver hears
nothing. A connection opened while its link is cut is accepted (the proxy cannot hold back a
TCP handshake as a dropped SYN would) but not connected onward until the link heals: the caller
sees a connection that never answers, and gives up on its own timeouts. `heal()` lets the held
bytes through, as TCP's retransmissions would after a short partition; a node that gave up on a
connection in the meantime has closed it, and its close is delivered after the held bytes. So
nodes see what they would see on a real network: silence, timeouts, their own reconnects.

Not simulated: the kernel's own TCP timeouts on a long partition (an unanswered connection is
reset after minutes); the nodes' request timeouts are far shorter and decide first.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable

CHUNK = 65536
CONNECT_TIMEOUT = 5.0


class Network:
    """The links between a cluster's nodes: fronts per node listener, and which directed links
    (from node, to node), of every listener or of one listener name, are cut."""

    def __init__(self, pids: Callable[[], dict[int, int]]) -> None:
        self._pids = pids
        """Node id -> pid of its running process, asked at each new connection."""
        self._cut: set[tuple[int, int, str]] = set()
        """(from node, to node, listener name): "" cuts every listener of that link."""
        self._changed = threading.Condition()
        self._closed = False
        self._fronts: list[_Front] = []
        self._sockets: set[socket.socket] = set()

    # --- set up ------------------------------------------------------------------------------

    def front(self, node_id: int, target: tuple[str, int], listener: str = "") -> tuple[str, int]:
        """A front for node `node_id`'s listener (named `listener`) at `target`; returns the
        front's address."""
        front = _Front(self, node_id, target, listener)
        self._fronts.append(front)
        return front.address

    # --- faults ------------------------------------------------------------------------------

    def cut(self, sources: Iterable[int], destinations: Iterable[int], listener: str = "") -> None:
        """Stop bytes from every node in `sources` to every node in `destinations` (one way),
        on connections to the listener named `listener` of either end ("": every listener)."""
        with self._changed:
            for a in sources:
                for b in destinations:
                    if a != b:
                        self._cut.add((a, b, listener))
            self._changed.notify_all()

    def restore(self, sources: Iterable[int], destinations: Iterable[int], listener: str = "") -> None:
        """Undo `cut(sources, destinations, listener)`: those links carry bytes again."""
        with self._changed:
            for a in sources:
                for b in destinations:
                    self._cut.discard((a, b, listener))
            self._changed.notify_all()

    def heal(self) -> None:
        """Every link carries bytes again, the held ones first."""
        with self._changed:
            self._cut.clear()
            self._changed.notify_all()

    @property
    def cut_links(self) -> frozenset[tuple[int, int]]:
        """The directed links (from node, to node) that are cut, on some listener or all."""
        with self._changed:
            return frozenset((a, b) for a, b, _ in self._cut)

    def close(self) -> None:
        """Close every front and every connection through them."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            sockets = list(self._sockets)
            self._sockets.clear()
        for front in self._fronts:
            front.close()
        for sock in sockets:
            # shutdown, not only close: a pump blocked in recv keeps a closed descriptor's
            # connection open (no FIN); shutdown ends it and wakes the pump
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            _close(sock)

    # --- for the fronts ----------------------------------------------------------------------

    def wait_open(self, source: int | None, destination: int | None, listener: str = "") -> bool:
        """Block while the link (of a connection to `listener`) is cut; False once the
        network is closed."""
        with self._changed:
            while not self._closed and (
                (source, destination, "") in self._cut
                or (listener and (source, destination, listener) in self._cut)
            ):
                self._changed.wait()
            return not self._closed

    def track(self, sock: socket.socket) -> bool:
        with self._changed:
            if self._closed:
                return False
            self._sockets.add(sock)
            return True

    def forget(self, sock: socket.socket) -> None:
        with self._changed:
            self._sockets.discard(sock)

    def identify(self, peer: tuple[str, int], local: tuple[str, int]) -> int | None:
        """The node whose socket `peer` connected to our `local` address (None: an outsider)."""
        inode = _socket_inode(peer, local)
        if inode is None:
            return None
        link = f"socket:[{inode}]"
        for node_id, pid in self._pids().items():
            try:
                names = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for name in names:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{name}") == link:
                        return node_id
                except OSError:
                    continue
        return None


class _Front:
    """A listening socket that forwards every connection to one node's listener."""

    def __init__(
        self, network: Network, node_id: int, target: tuple[str, int], listener: str = ""
    ) -> None:
        self.network, self.node_id, self.target = network, node_id, target
        self.listener_name = listener
        self.listener = socket.create_server((target[0], 0), backlog=128)
        self.address: tuple[str, int] = self.listener.getsockname()[:2]
        threading.Thread(target=self._accept, daemon=True, name=f"front-{node_id}").start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                inbound, peer = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._connect, args=(inbound, peer), daemon=True,
                name=f"front-{self.node_id}-conn",
            ).start()  # fmt: skip

    def _connect(self, inbound: socket.socket, peer: tuple[str, int]) -> None:
        network = self.network
        if not network.track(inbound):
            _close(inbound)
            return
        source = network.identify(peer, self.address)
        destination = self.node_id
        # The handshake of a connection opened across a cut would not complete: hold it.
        if not network.wait_open(source, destination, self.listener_name):
            return
        try:
            upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT)
            upstream.settimeout(None)
        except OSError:  # the node is down: refuse, as it would
            network.forget(inbound)
            _close(inbound)
            return
        if not network.track(upstream):
            _close(upstream)
            return
        for args in ((inbound, upstream, source, destination), (upstream, inbound, destination, source)):
            threading.Thread(target=self._pump, args=args, daemon=True,
                             name=f"front-{self.node_id}-pump").start()  # fmt: skip

    def _pump(
        self, reader: socket.socket, writer: socket.socket, source: int | None, destination: int | None
    ) -> None:
        network = self.network
        while True:
            try:
                data = reader.recv(CHUNK)
            except OSError:
                data = b""
            if not network.wait_open(source, destination, self.listener_name):
                return  # closed: `close` closes the sockets
            if not data:  # the sender closed (or reset): so does the other side, after the data
                _end(network, reader, writer)
                return
            try:
                writer.sendall(data)
            except OSError:  # the receiver is gone: so is the connection
                _end(network, reader, writer)
                return


def _end(network: Network, *sockets: socket.socket) -> None:
    for sock in sockets:
        network.forget(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the other pump's recv
        _close(sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


def _socket_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The inode of the IPv4 TCP socket with this local and remote address, from /proc/net/tcp."""
    wanted = (_proc_address(local), _proc_address(remote))
    try:
        with open("/proc/net/tcp") as table:
            next(table)  # the header
            for line in table:
                fields = line.split()
                if (fields[1], fields[2]) == wanted:
                    return int(fields[9])
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    return None


def _proc_address(address: tuple[str, int]) -> str:
    """/proc/net/tcp's spelling: the IPv4 address as a host-order hex word, the port in hex."""
    packed = socket.inet_aton(address[0])
    return f"{int.from_bytes(packed, sys.byteorder):08X}:{address[1]:04X}"
