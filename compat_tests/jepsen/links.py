"""Network partitions of the controller links, by a TCP proxy per ordered pair of nodes.

The harness binds every node on 127.0.0.1 in the test's own network namespace, so there is no
network between two nodes to cut (network namespaces would need root). What can be cut without
privileges is what a node reaches through its own configuration: `controller.quorum.voters`.
`LinkProxies` gives node i, for every other voter j, a proxy of its own in front of j's
controller listener and points i's voters entry for j at it. Everything i sends to j's
controller listener then crosses link (i, j): Raft (votes, fetches of the metadata log) and the
broker's traffic to the active controller (registration, heartbeats, AlterPartition).

`cut(a, b)` partitions the node sets a and b as a dropped link does: bytes on their links are
discarded (nothing is answered, nothing is refused) and new connections are accepted but
fed nothing. `heal()` closes every connection that lost bytes (their streams have holes; the
nodes reconnect, as after a TCP timeout) and forwards again.

Not cut: the client listeners. Followers fetch records from the leader's registered endpoint,
the same address clients use, so replica fetches cross a cut; a node cut off this way loses
the controller (it is fenced and its partitions get other leaders) but not its followers.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable

from strom.broker.testing.cluster import HOST, ClusterProcess

CHUNK = 65536


class _Link:
    """Proxy for connections from node `src` to node `dst`'s controller listener."""

    def __init__(self, src: int, dst: int, target: tuple[str, int]) -> None:
        self.src, self.dst, self.target = src, dst, target
        self.listener = socket.create_server((HOST, 0))
        self.port = int(self.listener.getsockname()[1])
        self.cut = False
        self.lock = threading.Lock()
        self.pairs: list[tuple[socket.socket, socket.socket | None]] = []
        self.damaged: set[int] = set()
        """Indexes into `pairs` of connections that lost bytes while cut."""
        self.closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"link-{src}-{dst}").start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self.listener.accept()
            except OSError:
                return  # closed
            upstream: socket.socket | None = None
            with self.lock:
                cut = self.cut
            if not cut:
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                    upstream.settimeout(None)
                except OSError:  # the node is down: refuse, as it would
                    inbound.close()
                    continue
            with self.lock:
                index = len(self.pairs)
                self.pairs.append((inbound, upstream))
                if upstream is None:
                    self.damaged.add(index)
            self._pump(index, inbound, upstream)
            if upstream is not None:
                self._pump(index, upstream, inbound)

    def _pump(self, index: int, source: socket.socket, sink: socket.socket | None) -> None:
        def run() -> None:
            while True:
                try:
                    data = source.recv(CHUNK)
                except OSError:
                    data = b""
                if not data:
                    break
                with self.lock:
                    cut = self.cut
                    if cut:
                        self.damaged.add(index)
                if cut or sink is None:
                    continue  # a dropped link: the bytes go nowhere
                try:
                    sink.sendall(data)
                except OSError:
                    break
            self._close(index)

        threading.Thread(
            target=run, daemon=True, name=f"link-{self.src}-{self.dst}-{index}"
        ).start()

    def _close(self, index: int) -> None:
        with self.lock:
            pair = self.pairs[index]
        for sock in pair:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def set_cut(self, cut: bool) -> None:
        with self.lock:
            self.cut = cut
            damaged = sorted(self.damaged) if not cut else []
            if not cut:
                self.damaged.clear()
        for index in damaged:
            self._close(index)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        self.listener.close()
        with self.lock:
            count = len(self.pairs)
        for index in range(count):
            self._close(index)


class LinkProxies:
    """A proxy per ordered pair of controllers; install before the cluster starts."""

    def __init__(self, cluster: ClusterProcess) -> None:
        self.links: dict[tuple[int, int], _Link] = {}
        controllers = cluster.controllers
        for src in controllers:
            for dst in controllers:
                if src is not dst:
                    host, port = dst.controller_address.rsplit(":", 1)
                    self.links[(src.node_id, dst.node_id)] = _Link(
                        src.node_id, dst.node_id, (host, int(port))
                    )
        for src in cluster.nodes:
            voters = ",".join(
                f"{dst.node_id}@{dst.controller_address}"
                if dst.node_id == src.node_id
                else f"{dst.node_id}@{HOST}:{self.links[(src.node_id, dst.node_id)].port}"
                for dst in controllers
            )
            src.overrides["controller.quorum.voters"] = voters

    def cut(self, a: Iterable[int], b: Iterable[int]) -> None:
        """Drop every link between a node in `a` and a node in `b`, both ways."""
        left, right = set(a), set(b)
        for (src, dst), link in self.links.items():
            if (src in left and dst in right) or (src in right and dst in left):
                link.set_cut(True)

    def heal(self) -> None:
        for link in self.links.values():
            link.set_cut(False)

    def close(self) -> None:
        for link in self.links.values():
            link.close()
