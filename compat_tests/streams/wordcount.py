"""A Kafka Streams word count (`src/WordCount.java`, kafka-streams from Maven Central) as a
child JVM, and the checker that decides whether it counted exactly.

`build(out_dir)` compiles the application against `kafka-streams` `maven.KAFKA_VERSION` (javac
with every lint and -Werror, as the Java client harness) and returns the classpath to run it.
`WordCountApp` runs one instance: it reads `input` (records keyed by word), counts per key in
a state store whose changelog lives on the cluster, and writes every new count to `output`
(key: the word, value: the count as a big-endian 8-byte long). The record cache is off, so
each input record yields exactly one output record.

The checker (`exact_counts`) is the definition of "exactly once" here: read the output with
`isolation.level=read_committed`; for every key the input holds n times, the counts written
are exactly 1, 2, ..., n in that order. A duplicate (an input record counted twice, as an
application crash under at_least_once gives) shows as a repeated or skipped count or a total
above n; a loss shows as a sequence that stops short; an aborted transaction's output leaking
to the reader shows as a repeated count.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from compat_tests import maven
from compat_tests.apache_kafka import LOG4J, write_log4j
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Deadline

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
STREAMS = f"org.apache.kafka:kafka-streams:{maven.KAFKA_VERSION}"
MAIN = "WordCount"
JVM_OPTIONS = ("-Xmx384m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true")  # fmt: skip
LOGGERS = {
    "org.apache.kafka.clients.consumer.ConsumerConfig": "WARN",
    "org.apache.kafka.clients.producer.ProducerConfig": "WARN",
    "org.apache.kafka.clients.admin.AdminClientConfig": "WARN",
    "org.apache.kafka.streams.StreamsConfig": "WARN",
}
"""Quieter where the clients print whole configurations; INFO elsewhere."""


def build(out_dir: Path) -> str:
    """Compile the application into out_dir; the classpath to run it (maven.JvmUnavailable if
    Java, Maven or the jars are missing)."""
    jars = os.pathsep.join(str(jar) for jar in maven.classpath(STREAMS, LOG4J))
    javac = maven.require_java().removesuffix("java") + "javac"
    if not Path(javac).exists():
        raise maven.JvmUnavailable(f"no `javac` beside `java`: {maven.MVN_INSTALL}")
    out_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [javac, "-encoding", "UTF-8", "-Xlint:all", "-Werror", "-d", str(out_dir), "-cp", jars,
         *(str(s) for s in sorted(SOURCES.glob("*.java")))],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return os.pathsep.join([jars, str(out_dir)])


@dataclass
class WordCountApp:
    """One instance of the application; its stdout events are collected by a thread, its
    stderr (the Streams log) goes to `log_path`."""

    classpath: str
    workdir: Path
    bootstrap: str
    application_id: str
    input: str
    output: str
    guarantee: str = "exactly_once_v2"
    commit_interval_ms: int | None = None
    """None: Kafka Streams' default for the guarantee."""
    events: list[dict[str, Any]] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None
    _since: int = 0
    _reader: threading.Thread | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def log_path(self) -> Path:
        return self.workdir / "streams.log"

    def start(self) -> None:
        """Start an instance (again, after a kill: the same state directory, as a restarted
        process on the same machine would)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        log4j = write_log4j(self.workdir / "log4j2.properties", loggers=LOGGERS)
        command = [
            maven.require_java(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}",
            "-cp", self.classpath, MAIN, self.bootstrap, self.application_id, self.input,
            self.output, self.guarantee, str(self.workdir / "state"),
            *([] if self.commit_interval_ms is None else [str(self.commit_interval_ms)]),
        ]  # fmt: skip
        with self.log_path.open("a") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True,
                start_new_session=True,
            )  # fmt: skip
        self.process = process
        with self._changed:
            self._since = len(self.events)
        self._reader = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._reader.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    event = {"event": "stray", "line": line.rstrip()}
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()

    def _reaped(self) -> None:
        """After the process exited: its output read to the end and closed."""
        if self._reader is not None:
            self._reader.join(10)
            self._reader = None
        self.process = None

    def wait_running(self, timeout: float = 120.0) -> None:
        """Until this instance reports RUNNING (after its latest start)."""
        assert self.process is not None
        deadline = Deadline(timeout)
        with self._changed:
            while True:
                self.check_alive()
                if any(e.get("state") == "RUNNING" for e in self.events[self._since :]):
                    return
                if deadline.expired:
                    raise AssertionError(
                        f"Kafka Streams not RUNNING after {timeout}s\n{self.tail()}"
                    )
                self._changed.wait(0.5)

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"Kafka Streams exited with code {self.process.returncode}:\n{self.tail()}"
            )

    def kill9(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self._reaped()

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reaped()

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


Read = dict[int, list[tuple[bytes | None, bytes | None]]]
"""partition -> (key, value) in offset order."""


def read_topic(bootstrap: str, topic: str, partitions: int, isolation: str,
               timeout: float = 60.0) -> Read:  # fmt: skip
    """Every record of `topic` up to its end for `isolation` (the LSO for read_committed):
    asked again while leadership moves after a kill."""
    deadline = Deadline(timeout)
    while True:
        try:
            return _read_topic(bootstrap, topic, partitions, isolation, deadline)
        except Exception:
            if deadline.expired:
                raise


def _read_topic(bootstrap: str, topic: str, partitions: int, isolation: str,
                deadline: Deadline) -> Read:  # fmt: skip
    consumer = ck.consumer(
        bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True}
    )
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=max(1.0, deadline.remaining), cached=False
            )
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: Read = {p: [] for p in range(partitions)}
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < partitions:
            if deadline.expired:
                raise AssertionError(f"{topic}: not read to {ends} in time")
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise AssertionError(f"{topic}: {error}")
                    continue
                p = msg.partition()
                assert p is not None
                out[p].append((msg.key(), msg.value()))
            for tp in consumer.position([TopicPartition(topic, p) for p in range(partitions)]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        return out
    finally:
        consumer.close()


def input_counts(records: Read) -> Counter[str]:
    return Counter((key or b"").decode() for part in records.values() for key, _value in part)


def output_counts(records: Read) -> dict[str, list[int]]:
    """key -> the counts written for it, in the order of its partition."""
    seen: dict[str, list[int]] = defaultdict(list)
    for part in records.values():
        for key, value in part:
            if key is None or value is None or len(value) != 8:
                raise AssertionError(f"not a (word, 8-byte count) record: {key!r} {value!r}")
            seen[key.decode()].append(int.from_bytes(value, "big", signed=True))
    return dict(seen)


@dataclass(frozen=True)
class Verdict:
    expected: int
    """Input records: the number of counts an exact run writes."""
    written: int
    """Counts a read_committed consumer read."""
    duplicated: int
    """Counts beyond the first run of 1..n (written twice, or past n)."""
    lost: int
    """Input records whose count never appeared."""
    wrong_keys: list[str]
    """Keys whose counts are not exactly 1..n (at most ten, for the report)."""

    @property
    def exact(self) -> bool:
        return self.written == self.expected and not self.wrong_keys


def exact_counts(inputs: Counter[str], outputs: dict[str, list[int]]) -> Verdict:
    """Compare what was written with what an exact run writes (see the module docstring)."""
    wrong: list[str] = []
    duplicated = lost = 0
    for key in sorted(set(inputs) | set(outputs)):
        n = inputs.get(key, 0)
        counts = outputs.get(key, [])
        if counts != list(range(1, n + 1)):
            wrong.append(key)
        distinct = set(counts)
        duplicated += len(counts) - len(distinct & set(range(1, n + 1)))
        lost += len(set(range(1, n + 1)) - distinct)
    return Verdict(
        expected=sum(inputs.values()),
        written=sum(len(c) for c in outputs.values()),
        duplicated=duplicated,
        lost=lost,
        wrong_keys=wrong[:10],
    )


def caught_up(inputs: Counter[str], outputs: dict[str, list[int]]) -> bool:
    """Every key's latest count reached its number of inputs (the run may still be exact or not)."""
    return all(outputs.get(key, [0])[-1] >= n for key, n in inputs.items())


def words(count: int, start: int, vocabulary: Iterable[str]) -> list[str]:
    """`count` words cycling through the vocabulary with a stride, from position `start`."""
    vocab = list(vocabulary)
    return [vocab[(i * 7) % len(vocab)] for i in range(start, start + count)]
