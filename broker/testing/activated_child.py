"""Start a child process with listening sockets passed by socket activation (systemd's protocol).

The test side of `strom.broker.process.socket_activation`: a test binds port 0 itself (`listening_socket`),
so it knows the port before the child starts, and hands the socket to the child
(`popen_activated`), which serves on it. Nothing is guessed and nothing can take the port between
the two.

The protocol puts the sockets at descriptors 3, 4, ... and `LISTEN_PID` must be the child's own
pid, which is only known after the fork. `subprocess` cannot move descriptors or set variables
after forking without `preexec_fn` (unsafe with threads, and the harnesses read logs on
threads), so a tiny isolated Python (`-I -S`, a few milliseconds) does it and then `exec`s the
real command in the same process, as systemd's `systemd-socket-activate` does.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

_LAUNCHER = """
import fcntl, os, sys
sep = sys.argv.index("--")
fds = [int(a) for a in sys.argv[1:sep]]
moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3 + len(fds)) for fd in fds]
for fd in fds:
    os.close(fd)
for index, fd in enumerate(moved):
    os.dup2(fd, 3 + index)
    os.close(fd)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = str(len(fds))
os.execv(sys.argv[sep + 1], sys.argv[sep + 1:])
"""

BACKLOG = 128


def listening_socket(host: str = "127.0.0.1") -> socket.socket:
    """A TCP socket listening on a port of the kernel's choosing (port 0)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def popen_activated(
    args: Sequence[str],
    sockets: Sequence[tuple[str, socket.socket]],
    env: Mapping[str, str],
    *,
    stdout: int | None = subprocess.DEVNULL,
    stderr: int | None = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """`subprocess.Popen(args)` with `sockets` passed as (name, socket) by socket activation;
    stdin is /dev/null, output is text.

    `args[0]` must be an absolute path (it is `exec`ed as is). The sockets stay open here:
    the caller keeps them (a restarted child can inherit them again) and closes them.
    """
    if any(":" in name for name, _ in sockets):
        raise ValueError("socket names must not contain ':' (LISTEN_FDNAMES separates them with it)")
    fds = [sock.fileno() for _, sock in sockets]
    launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER, *map(str, fds), "--", *args]
    child_env = {k: v for k, v in env.items() if k not in ("LISTEN_PID", "LISTEN_FDS")}
    child_env["LISTEN_FDNAMES"] = ":".join(name for name, _ in sockets)
    return subprocess.Popen(
        launcher, env=child_env, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=stdout,
        stderr=stderr, text=True,
    )  # fmt: skip
