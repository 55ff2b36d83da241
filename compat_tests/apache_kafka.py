"""A real Apache Kafka broker for tests: KRaft, one node acting as broker and controller.

The jars come from Maven Central through `maven.kafka("kafka_2.13")` (plus a log4j binding so
the broker's log reaches a file); nothing of Kafka is installed. `ApacheKafka(workdir)` writes a
`server.properties`, formats the storage with Kafka's own storage tool, starts `kafka.Kafka`
in a JVM with a small heap, waits until it says it started and a TCP connection is accepted,
and stops it with SIGTERM (SIGKILL if it does not go). Its console log goes to
`workdir/server.log`; `tail()` returns its last lines, which the fixtures attach to failures.

Kafka's advertised listeners need a real port up front (port 0 would be advertised as 0), so
`free_port()` binds a socket to port 0, reads the port and closes it: the one place the tests
pick a port instead of letting the server bind port 0.

A missing `java`/`mvn` or unresolvable jars raise `maven.JvmUnavailable` with a one-line
instruction: the tests that need Kafka fail, never skip.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from compat_tests import maven

LOG4J = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
"""slf4j 1.x → log4j2 binding: Kafka's jars log through slf4j and the broker pom brings none."""

JVM_OPTIONS = ("-Xmx512m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

_LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
"""


def free_port() -> int:
    """A port that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def jvm_classpath(*artifacts: str) -> str:
    """The classpath of Kafka artifacts plus the log4j binding, as one string."""
    jars = maven.classpath(
        *(f"org.apache.kafka:{name}:{maven.KAFKA_VERSION}" for name in artifacts), LOG4J
    )
    return os.pathsep.join(str(jar) for jar in jars)


def write_log4j(path: Path, level: str = "INFO", loggers: Mapping[str, str] | None = None) -> Path:
    """A log4j2 config: everything to stdout at `level`, `loggers` at their own levels."""
    extra = "".join(
        f"logger.l{i}.name = {name}\nlogger.l{i}.level = {lvl}\n"
        for i, (name, lvl) in enumerate((loggers or {}).items())
    )
    path.write_text(_LOG4J2.format(level=level) + extra)
    return path


def tail_of(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return f"(no {path.name})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class ApacheKafka:
    """One Apache Kafka node (broker + controller) in a child JVM."""

    def __init__(self, workdir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.workdir = workdir
        self.overrides = dict(overrides or {})
        self.log_path = workdir / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.bootstrap = ""
        self.cluster_id = ""

    def properties(self, port: int, controller_port: int) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }

    def _java(self, main: str, *args: str, classpath: str) -> list[str]:
        log4j = write_log4j(self.workdir / "log4j2.properties")
        return [
            maven.require_java(), *JVM_OPTIONS, "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}", f"-Dkafka.logs.dir={self.workdir}",
            "-cp", classpath, main, *args,
        ]  # fmt: skip

    def start(self, timeout: float = 90.0) -> str:
        """Format the storage, start the JVM and wait until it serves; return the bootstrap."""
        classpath = jvm_classpath("kafka_2.13")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port, controller_port = free_port(), free_port()
        config = self.workdir / "server.properties"
        lines = [f"{k}={v}" for k, v in self.properties(self.port, controller_port).items()]
        config.write_text("\n".join(lines) + "\n")
        raw = "-"
        while raw.startswith("-"):  # the storage tool's parser would take it for an option
            raw = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.cluster_id = raw
        fmt = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", raw, "-c", str(config),
                       classpath=classpath),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka storage format failed:\n{fmt.stdout}{fmt.stderr}")
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(config), classpath=classpath),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"Apache Kafka exited with code {self.process.returncode} while starting; "
                    f"its log:\n{self.tail()}"
                )
            if "Kafka Server started" in self.log_path.read_text(errors="replace"):
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    break
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"Apache Kafka did not start within {timeout}s; its log:\n{self.tail()}"
                )
            time.sleep(0.1)
        self.bootstrap = f"127.0.0.1:{self.port}"
        return self.bootstrap

    def tail(self, lines: int = 60) -> str:
        return tail_of(self.log_path, lines)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL if it does not exit in time."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ApacheKafka:
        try:
            self.start()
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
