"""A Kafka Connect distributed worker (Apache Kafka's own, from Maven Central) on Strom.

`ConnectWorker` runs `org.apache.kafka.connect.cli.ConnectDistributed` as a child JVM with a
properties file of ours: its config, offset and status topics on the broker under test, the
FileStream connectors (`connect-file`) on its class path, and its REST API on a free port.
Connect cannot bind port 0 (it advertises the port it was given), so `free_port` asks the OS
for one and releases it just before the worker starts.

Logging goes through `compat_tests/kafka_tools/log4j2.xml` (warnings on stderr) except the
herder's and the group coordinator's INFO lines, which say which worker leads the group.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat_tests import maven
from compat_tests.helpers import wait_until
from compat_tests.kafka_tools.tools import LOG_BRIDGE, java_command

HERE = Path(__file__).resolve().parent
LOG_CONFIG = HERE / "log4j2.xml"
MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"


def free_port() -> int:
    """A TCP port nothing listens on right now (Connect must be told its port up front)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def connect_classpath() -> list[Path]:
    """Connect's runtime, the FileStream connectors and the JSON converter, with logging."""
    coordinates = [
        f"org.apache.kafka:{name}:{maven.KAFKA_VERSION}"
        for name in ("connect-runtime", "connect-file", "connect-json")
    ]
    return maven.classpath(*coordinates, LOG_BRIDGE)


@dataclass(frozen=True)
class Topics:
    config: str
    offsets: str
    status: str
    offset_partitions: int = 3
    status_partitions: int = 2


class RestError(AssertionError):
    def __init__(self, status: int, body: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body}")
        self.status = status
        self.body = body


class ConnectWorker:
    """One distributed worker; `start`/`stop` keep its port, group and topics."""

    def __init__(
        self, java: str, classpath: list[Path], bootstrap: str, group: str, topics: Topics,
        work_dir: Path,
    ) -> None:  # fmt: skip
        self.java = java
        self.classpath = classpath
        self.bootstrap = bootstrap
        self.group = group
        self.topics = topics
        self.work_dir = work_dir
        self.port = free_port()
        self.process: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=3000)
        self.received = 0  # lines read so far (`output` keeps the last of them)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "config.storage.topic": self.topics.config,
            "offset.storage.topic": self.topics.offsets,
            "status.storage.topic": self.topics.status,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": str(self.topics.offset_partitions),
            "status.storage.partitions": str(self.topics.status_partitions),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.flush.interval.ms": "500",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            # The connectors' own ServiceLoader manifests: no reflective class-path scan.
            "plugin.discovery": "service_load",
            "task.shutdown.graceful.timeout.ms": "5000",
        }

    def start(self, timeout: float = 90.0) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "worker.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        command = java_command(self.java, self.classpath, MAIN, str(config),
                               log_config=LOG_CONFIG)  # fmt: skip
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, encoding="utf-8", errors="replace",
        )  # fmt: skip
        threading.Thread(target=self._drain, args=(self.process,), daemon=True).start()
        wait_until(self._ready, timeout=timeout, what=f"Connect's REST API at {self.url}",
                   interval=0.25)  # fmt: skip

    def _drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.output.append(line.rstrip("\n"))
            self.received += 1
        process.stdout.close()

    def _ready(self) -> bool:
        process = self.process
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the Connect worker exited with {process.returncode}:\n"
                                 f"{self.tail()}")  # fmt: skip
        try:
            # /connectors answers only once the worker has joined its group and read its
            # config topic; / answers as soon as the HTTP server is up.
            self.get("/connectors")
        except (OSError, RestError):
            return False
        return True

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: Connect's shutdown hook stops the tasks and commits their offsets."""
        process = self.process
        assert process is not None
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            dump = self.thread_dump(process)
            process.kill()
            process.wait()
            raise AssertionError(f"the Connect worker ignored SIGTERM for {timeout}s:\n"
                                 f"{self.tail()}\n--- its threads ---\n{dump}") from None  # fmt: skip

    def thread_dump(self, process: subprocess.Popen[str], timeout: float = 10.0) -> str:
        """SIGQUIT: the JVM prints every thread's stack to its stdout (what a hung shutdown
        waits for); the lines from "Full thread dump" on, once the dump's last line is read."""
        start = self.received
        process.send_signal(signal.SIGQUIT)
        with contextlib.suppress(AssertionError):  # whatever arrived is still worth showing
            wait_until(lambda: any("JNI global refs" in line for line in self._since(start)),
                       timeout=timeout, what="the JVM's thread dump", interval=0.1)  # fmt: skip
        lines = self._since(start)
        begun = next((i for i, line in enumerate(lines) if "Full thread dump" in line), 0)
        return "\n".join(lines[begun:])

    def _since(self, count: int) -> list[str]:
        """The lines read after the first `count` (as many as `output` still holds)."""
        new = self.received - count
        return list(self.output)[-new:] if new > 0 else []

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def tail(self, lines: int = 80) -> str:
        return "\n".join(list(self.output)[-lines:])

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise RestError(error.code, error.read().decode(errors="replace"),
                            f"{method} {path}") from None  # fmt: skip
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def running(self, connector: str, tasks: int = 1) -> bool:
        """The connector and all its tasks report RUNNING (a FAILED one fails the test)."""
        try:
            status = self.get(f"/connectors/{connector}/status")
        except RestError as error:
            if error.status == 404:
                return False
            raise
        states = [status["connector"]["state"], *(t["state"] for t in status["tasks"])]
        if "FAILED" in states:
            raise AssertionError(f"{connector} failed: {json.dumps(status, indent=1)}")
        return len(status["tasks"]) == tasks and set(states) == {"RUNNING"}
