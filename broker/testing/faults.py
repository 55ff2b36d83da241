"""The harness's end of request fault injection (`strom.broker.network.faults`).

A `FaultControl` listens on a Unix socket in a private temporary directory and gives the
child it starts `STROM_TEST_FAULT_INJECTION=<that path>` (`environment()`); the broker
connects at start-up, and every rule goes over that connection, each acknowledged before
`add`/`clear` return, so a test's next request already sees it. A restarted process
connects again and starts with no rules.

    control.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="orders")
    control.add(api="Fetch", delay_ms=500, count=None)      # until cleared
    control.clear()
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

from strom.broker.network.faults import ENV
from strom.wire.errors import ErrorCode
from strom.wire.messages import APIS

API_KEYS = {info.name: key for key, info in APIS.items()}


class FaultControlError(RuntimeError):
    """The broker refused a rule, or is not connected."""


def api_key(api: str | int) -> int:
    """An API by Kafka's name ("Produce", "JoinGroup") or key."""
    if isinstance(api, int):
        return api
    try:
        return API_KEYS[api]
    except KeyError:
        raise ValueError(
            f"unknown API {api!r} (Kafka's names: {', '.join(sorted(API_KEYS))})"
        ) from None


def error_code(error: str | int | ErrorCode | None) -> int:
    if error is None:
        return 0
    if isinstance(error, str):
        try:
            return int(ErrorCode[error])
        except KeyError:
            raise ValueError(
                f"unknown error {error!r} (Kafka's names, e.g. NOT_LEADER_OR_FOLLOWER)"
            ) from None
    return int(error)


class FaultControl:
    """One process's fault rules, from the test's side."""

    def __init__(self, name: str = "broker") -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="strom-faults-"))  # short: Unix socket paths are
        self.path = self._dir / f"{name}.sock"  # limited to about 100 bytes
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(4)
        self._lock = threading.Lock()
        self._connected = threading.Condition(self._lock)
        self._conn: socket.socket | None = None
        self._reader: Any = None
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"faults-{name}").start()

    def environment(self) -> dict[str, str]:
        """What the child's environment needs to connect here."""
        return {ENV: str(self.path)}

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._connected:
                if self._closed:
                    _close(conn)
                    return
                self._drop()  # the previous process is gone: a restart
                self._conn, self._reader = conn, conn.makefile("rb")
                self._connected.notify_all()

    def add(
        self,
        api: str | int,
        *,
        error: str | int | ErrorCode | None = None,
        count: int | None = 1,
        topic: str | None = None,
        partition: int | None = None,
        delay_ms: int = 0,
        timeout: float = 10.0,
    ) -> None:
        """Fail (with `error`) and/or delay (by `delay_ms`) the next `count` requests of `api`
        (None: every one until `clear`), only those naming `topic` (and `partition`) if given."""
        rule = {"api": api_key(api), "error": error_code(error), "delay_ms": delay_ms,
                "count": count, "topic": topic, "partition": partition}  # fmt: skip
        self._send({"op": "add", "rule": rule}, timeout)

    def clear(self, timeout: float = 10.0) -> None:
        """Remove every rule."""
        self._send({"op": "clear"}, timeout)

    def rules(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The rules still in force (a used-up rule is gone), as the broker holds them."""
        reply = self._send({"op": "list"}, timeout)
        rules: list[dict[str, Any]] = reply["rules"]
        return rules

    def _send(self, command: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._connected:
            if not self._connected.wait_for(
                lambda: self._conn is not None or self._closed, timeout
            ):
                raise FaultControlError("the broker has not connected for fault injection")
            if self._conn is None:
                raise FaultControlError("fault control is closed")
            try:
                self._conn.settimeout(timeout)
                self._conn.sendall(json.dumps(command).encode() + b"\n")
                line = self._reader.readline()
            except OSError as exc:
                raise FaultControlError(f"the broker's fault connection failed: {exc}") from exc
            if not line:
                raise FaultControlError("the broker is gone (restart it to inject faults again)")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise FaultControlError(f"the broker refused the rule: {reply.get('error')}")
        return reply

    def close(self) -> None:
        with self._connected:
            self._closed = True
            self._drop()
            self._connected.notify_all()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        _close(self._listener)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _drop(self) -> None:
        """Close the current connection and its reader (the caller holds the lock)."""
        if self._reader is not None:
            with contextlib.suppress(OSError):
                self._reader.close()
            self._reader = None
        if self._conn is not None:
            _close(self._conn)
            self._conn = None


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
