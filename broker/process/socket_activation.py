"""Socket activation: serve on listening sockets inherited from whoever started `strom serve`.

This is systemd's protocol (`sd_listen_fds(3)`), so the same mechanism serves two needs:

- **systemd** (or any supervisor speaking the protocol) owns the ports: a `.socket` unit binds
  them (privileged ports, no window of refused connections across a restart: the kernel queues
  them while the broker restarts).
- **test harnesses** bind port 0 themselves and know every node's port before any node starts,
  which a static controller quorum needs (`controller.quorum.voters` names every voter's
  controller port in every node's config), without ever guessing a free port.

The protocol: the starter passes listening sockets as file descriptors 3, 4, ... and sets
`LISTEN_PID` (the pid they are meant for, so a child that inherits the environment by mistake
ignores them), `LISTEN_FDS` (how many) and `LISTEN_FDNAMES` (colon-separated names, one per
descriptor; systemd's `FileDescriptorName=`). Strom names sockets after listeners: a socket named
`CONTROLLER` replaces binding the `CONTROLLER://...` entry of `listeners` (names compare
case-insensitively; several sockets may share a name, e.g. IPv4 and IPv6). The entry's port must
be the socket's port or 0. Listeners with no inherited socket are bound as usual; an inherited
socket that names no listener stops start-up (fail closed: it would be a port nobody serves).

As `sd_listen_fds(unset_environment=1)` does, the variables are removed once read and the
descriptors are made close-on-exec, so nothing this process starts inherits them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping

import trio

from strom.config import Listener

LISTEN_FDS_START = 3
"""The first inherited descriptor (after stdin, stdout, stderr), as in systemd."""

VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


class ActivationError(Exception):
    """Inherited sockets that cannot be used; the message says why, in one line."""


def inherited_sockets(
    environ: MutableMapping[str, str] | None = None, pid: int | None = None
) -> dict[str, list[socket.socket]]:
    """The listening sockets passed to this process, by upper-cased name ({} when none).

    Reads and removes LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES from `environ` (the process
    environment by default). Sockets meant for another pid are ignored, as systemd's library
    ignores them. Raises `ActivationError` for variables or descriptors that make no sense.
    """
    env = os.environ if environ is None else environ
    values = {name: env.pop(name, None) for name in VARIABLES}
    listen_pid, listen_fds, listen_names = values["LISTEN_PID"], values["LISTEN_FDS"], values["LISTEN_FDNAMES"]
    if listen_pid is None or listen_fds is None:
        return {}
    if not listen_pid.isdigit() or not listen_fds.isdigit():
        raise ActivationError(
            f"socket activation: LISTEN_PID={listen_pid!r} and LISTEN_FDS={listen_fds!r} must be "
            "non-negative integers"
        )
    if int(listen_pid) != (os.getpid() if pid is None else pid):
        return {}
    count = int(listen_fds)
    names = listen_names.split(":") if listen_names is not None else ["unknown"] * count
    if len(names) != count:
        raise ActivationError(
            f"socket activation: LISTEN_FDNAMES names {len(names)} sockets but LISTEN_FDS={count}"
        )
    out: dict[str, list[socket.socket]] = {}
    try:
        for index, name in enumerate(names):
            sock = _listening_socket(LISTEN_FDS_START + index, name)
            out.setdefault(name.upper(), []).append(sock)
    except ActivationError:
        close_all(out)
        raise
    return out


def _listening_socket(fd: int, name: str) -> socket.socket:
    what = f"socket activation: descriptor {fd} ({name})"
    try:
        os.set_inheritable(fd, False)
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise ActivationError(f"{what} is not a socket ({exc.strerror})") from exc
    listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        sock.close()
        raise ActivationError(f"{what} is not a TCP socket")
    if not listening:
        sock.close()
        raise ActivationError(f"{what} is not listening")
    return sock


def adopt(listener: Listener, sockets: list[socket.socket]) -> tuple[Listener, list[trio.SocketListener]]:
    """Serve `listener` on inherited sockets: the listener with the port they are bound to."""
    ports = {sock.getsockname()[1] for sock in sockets}
    if len(ports) != 1 or listener.port not in (0, *ports):
        got = ",".join(map(str, sorted(ports)))
        raise ActivationError(
            f"socket activation passed {listener.name} sockets on port {got} but 'listeners' "
            f"says {listener.url}: set its port to {got} or 0"
        )
    adopted = [trio.SocketListener(trio.socket.from_stdlib_socket(sock)) for sock in sockets]
    return listener._replace(port=ports.pop()), adopted


def close_all(sockets: dict[str, list[socket.socket]]) -> None:
    """Close inherited sockets this process will not serve on."""
    for group in sockets.values():
        for sock in group:
            sock.close()
    sockets.clear()
