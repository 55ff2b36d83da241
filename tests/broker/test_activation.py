"""Socket activation: `strom serve` serves on listening sockets it inherits (systemd's protocol).

Children get their sockets through `strom.broker.testing.activated_child.popen_activated`, the same
path the cluster harness uses; the variables' parsing is tested in-process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from strom.broker.process.socket_activation import ActivationError, inherited_sockets
from strom.broker.testing.activated_child import listening_socket, popen_activated
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import child_environment
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

O_CLOEXEC = 0o2000000
"""The close-on-exec bit of the `flags` line in /proc/PID/fdinfo/FD (octal, Linux)."""


def serve_args(tmp_path: Path, listeners: str) -> list[str]:
    return [sys.executable, "-m", "strom", "serve", "--override", f"listeners={listeners}",
            "--override", f"log.dirs={tmp_path / 'data'}"]  # fmt: skip


@contextmanager
def activated(
    args: list[str], sockets: list[tuple[str, socket.socket]]
) -> Iterator[subprocess.Popen[str]]:
    process = popen_activated(args, sockets, child_environment())
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        assert process.stderr is not None
        process.stderr.close()


def wait_started(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if " started: " in line:
            return line
    raise AssertionError("strom serve exited before starting:\n" + "".join(seen))


async def api_versions(address: str) -> ApiVersionsResponse:
    client = await KafkaClient.connect(address)
    try:
        return await client.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
    finally:
        await client.aclose()


def test_serves_on_the_inherited_socket(tmp_path: Path) -> None:
    sock = listening_socket()
    port = sock.getsockname()[1]
    with sock, activated(serve_args(tmp_path, "PLAINTEXT://127.0.0.1:0"), [("PLAINTEXT", sock)]) as child:
        line = wait_started(child)
        assert f"listeners=PLAINTEXT://127.0.0.1:{port} " in line
        assert trio.run(api_versions, f"127.0.0.1:{port}").error_code == 0
        # the inherited descriptor (3) is the listener, marked close-on-exec; nothing else listens
        flags = Path(f"/proc/{child.pid}/fdinfo/3").read_text().split("flags:")[1].split()[0]
        assert int(flags, 8) & O_CLOEXEC
        assert listening_ports(child.pid) == [port]


def test_configured_port_equal_to_the_socket_is_accepted(tmp_path: Path) -> None:
    sock = listening_socket()
    port = sock.getsockname()[1]
    args = serve_args(tmp_path, f"PLAINTEXT://127.0.0.1:{port}")
    with sock, activated(args, [("plaintext", sock)]) as child:  # names compare case-insensitively
        assert f"PLAINTEXT://127.0.0.1:{port} " in wait_started(child)


def test_a_listener_without_a_socket_is_bound_as_usual(tmp_path: Path) -> None:
    sock = listening_socket()
    args = [
        *serve_args(tmp_path, "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0"),
        "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    ]  # fmt: skip
    with sock, activated(args, [("OTHER", sock)]) as child:
        line = wait_started(child)
        assert f"OTHER://127.0.0.1:{sock.getsockname()[1]}" in line
        assert "PLAINTEXT://127.0.0.1:" in line


def refusal(tmp_path: Path, listeners: str, sockets: list[tuple[str, socket.socket]]) -> str:
    with activated(serve_args(tmp_path, listeners), sockets) as child:
        _, err = child.communicate(timeout=30)
    assert child.returncode == 1
    errors = [line for line in err.splitlines() if "level=ERROR" in line]
    assert len(errors) == 1, err
    return errors[0]


def test_a_mismatched_port_is_refused_in_one_line(tmp_path: Path) -> None:
    with listening_socket() as sock, listening_socket() as other:
        port, wrong = sock.getsockname()[1], other.getsockname()[1]
        line = refusal(tmp_path, f"PLAINTEXT://127.0.0.1:{wrong}", [("PLAINTEXT", sock)])
    assert f"port {port}" in line
    assert f"PLAINTEXT://127.0.0.1:{wrong}" in line


def test_a_socket_named_for_no_listener_is_refused(tmp_path: Path) -> None:
    with listening_socket() as sock:
        line = refusal(tmp_path, "PLAINTEXT://127.0.0.1:0", [("NOPE", sock)])
    assert "NOPE" in line


def test_a_socket_that_does_not_listen_is_refused(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        line = refusal(tmp_path, "PLAINTEXT://127.0.0.1:0", [("PLAINTEXT", sock)])
    assert "not listening" in line


def listening_ports(pid: int) -> list[int]:
    """Ports the process's sockets listen on (from /proc/net/tcp, by socket inode)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


# --- the variables, in-process -------------------------------------------------------------------


def test_variables_are_removed_once_read() -> None:
    env = {"LISTEN_PID": "1", "LISTEN_FDS": "0", "LISTEN_FDNAMES": "", "OTHER": "x"}
    assert inherited_sockets(env, pid=2) == {}  # meant for another process: ignored
    assert env == {"OTHER": "x"}
    env = {"LISTEN_PID": "7", "LISTEN_FDS": "0"}
    assert inherited_sockets(env, pid=7) == {}
    assert env == {}


def test_no_variables_no_sockets() -> None:
    assert inherited_sockets({}, pid=1) == {}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LISTEN_PID": "x", "LISTEN_FDS": "1"}, "non-negative integers"),
        ({"LISTEN_PID": "5", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "A"}, "names 1 sockets"),
    ],
)
def test_nonsense_is_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ActivationError, match=message):
        inherited_sockets(env, pid=5)
    assert env == {}
