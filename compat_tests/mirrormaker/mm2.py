"""MirrorMaker 2 (Kafka 4.1's `connect-mirror`) in dedicated mode, as a child JVM.

`MirrorMaker2(workdir, clusters, flows, extra)` writes an `mm2.properties` naming the clusters'
bootstrap servers, the replication flows and short intervals (topic refresh, config sync,
checkpoints, group offset sync, heartbeats: 1 s), starts
`org.apache.kafka.connect.mirror.MirrorMaker` on it and stops it with SIGTERM. Its log goes to
`workdir/mm2.log`; `tail()` gives the last lines for failure reports. The jars come from Maven
Central (`maven.py`); a missing `java`/`mvn` raises `maven.JvmUnavailable`.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from compat_tests import maven
from compat_tests.apache_kafka import JVM_OPTIONS, jvm_classpath, tail_of, write_log4j

MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"

FAST = {
    "refresh.topics.interval.seconds": "1",
    "refresh.groups.interval.seconds": "1",
    "sync.topic.configs.enabled": "true",
    "sync.topic.configs.interval.seconds": "1",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.enabled": "true",
    "sync.group.offsets.interval.seconds": "1",
    "emit.heartbeats.enabled": "true",
    "emit.heartbeats.interval.seconds": "1",
    # an offset sync for every record: offsets translate exactly, not to the last sync point
    "offset.lag.max": "0",
    "tasks.max": "1",
}
"""Intervals of about a second, so the tests poll for seconds rather than minutes."""

SINGLE_NODE = dict.fromkeys(
    (
        "replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
        "status.storage.replication.factor",
        "config.storage.replication.factor",
    ),
    "1",
)
"""Every cluster here is one broker."""


LOGGERS = {"org.apache.kafka.connect.runtime.WorkerConfig": "WARN"}
"""Quieter where Connect prints whole configurations; INFO elsewhere."""


class MirrorMaker2:
    def __init__(
        self,
        workdir: Path,
        clusters: Mapping[str, str],
        flows: Mapping[str, Mapping[str, str]],
        extra: Mapping[str, str] | None = None,
    ) -> None:
        """`clusters`: alias → bootstrap; `flows`: "A->B" → that flow's settings."""
        self.workdir = workdir
        self.log_path = workdir / "mm2.log"
        self.process: subprocess.Popen[bytes] | None = None
        props: dict[str, str] = {"clusters": ", ".join(clusters), **SINGLE_NODE, **FAST}
        for alias, bootstrap in clusters.items():
            props[f"{alias}.bootstrap.servers"] = bootstrap
        for flow, settings in flows.items():
            props[f"{flow}.enabled"] = "true"
            for key, value in settings.items():
                props[f"{flow}.{key}"] = value
        props.update(extra or {})
        self.properties = props

    def start(self) -> None:
        classpath = jvm_classpath("connect-mirror")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "mm2.properties"
        config.write_text("".join(f"{k} = {v}\n" for k, v in self.properties.items()))
        log4j = write_log4j(self.workdir / "log4j2.properties", loggers=LOGGERS)
        command = [
            maven.require_java(), *JVM_OPTIONS, "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath, MAIN, str(config),
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def tail(self, lines: int = 80) -> str:
        return tail_of(self.log_path, lines)

    def check_alive(self) -> None:
        """Fail with the log when MirrorMaker exited (it never should on its own)."""
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"MirrorMaker 2 exited with code {self.process.returncode}:\n{self.tail()}"
            )

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> MirrorMaker2:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
