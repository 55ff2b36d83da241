"""The partition proxy alone, in front of an echo server: forwards, drops while cut, and closes
the connections that lost bytes when healed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from compat_tests.helpers import wait_until
from compat_tests.jepsen.links import _Link


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=pump, args=(conn,), daemon=True).start()

    def pump(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()
    server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
    server.close()


def connect(link: _Link) -> socket.socket:
    return socket.create_connection(("127.0.0.1", link.port), timeout=10)


def test_forwards_drops_while_cut_and_closes_damaged_connections_on_heal(
    echo: tuple[str, int],
) -> None:
    link = _Link(1, 2, echo)
    try:
        with connect(link) as sock:
            sock.sendall(b"ping")
            assert sock.recv(4) == b"ping"
            link.set_cut(True)
            sock.sendall(b"lost")
            wait_until(
                lambda: len(link.damaged) > 0, timeout=10, what="the proxy to drop the bytes"
            )
            link.set_cut(False)
            assert sock.recv(4) == b""  # closed: its stream has a hole
        with connect(link) as sock:  # a new connection after the heal goes through
            sock.sendall(b"again")
            assert sock.recv(5) == b"again"
    finally:
        link.close()


def test_a_connection_opened_while_cut_gets_nothing_then_is_closed(echo: tuple[str, int]) -> None:
    link = _Link(1, 2, echo)
    try:
        link.set_cut(True)
        with connect(link) as sock:
            sock.sendall(b"hello")
            wait_until(
                lambda: len(link.damaged) > 0, timeout=10, what="the proxy to accept and drop"
            )
            link.set_cut(False)
            assert sock.recv(5) == b""
    finally:
        link.close()
