"""Run Apache Kafka's own CLI tools (the classes behind `bin/kafka-*.sh`) against Strom.

The jars are Kafka's release artifacts fetched from Maven Central by `compat_tests.maven`
(`kafka-tools` and, for `kafka-configs`, which still lives in the Scala core, `kafka_2.13`),
plus the SLF4J-to-Log4j bridge the release's `libs/` ships, so the tools log through
`log4j2.xml` here: warnings on stderr, nothing on stdout but what the tool prints.

    tools = KafkaTools.resolve()
    out = tools.run("kafka-topics", "--bootstrap-server", broker.bootstrap, "--list")
    assert out.lines == ["a", "b"]

`run` fails the test with the tool's output when it exits non-zero (or times out), unless
`check=False`; the result carries the exit code, stdout and stderr either way.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat_tests import maven

HERE = Path(__file__).resolve().parent
LOG_CONFIG = HERE / "log4j2.xml"

LOG_BRIDGE = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
"""The SLF4J 1.x binding Kafka's release puts in libs/ (its POMs leave the binding out)."""

MAIN_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
}
"""Each `bin/<name>.sh` script of the Kafka release and the class it runs."""

JVM_FLAGS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # short runs: start fast rather than reach peak speed
    "-Xss1m",
    "-Djava.awt.headless=true",
)


class ToolFailed(AssertionError):
    """A tool exited non-zero or timed out; the message carries its command and output."""


@dataclass(frozen=True)
class ToolResult:
    command: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        """stdout's non-blank lines, stripped of trailing whitespace."""
        return [line.rstrip() for line in self.stdout.splitlines() if line.strip()]

    def describe(self) -> str:
        cp = self.command.index("-cp") if "-cp" in self.command else -1
        shown = self.command[cp + 2 :] if cp >= 0 else self.command
        return (
            f"$ java ... {' '.join(shown)}\nexit code {self.code}\n"
            f"--- stdout ---\n{_tail(self.stdout)}\n--- stderr ---\n{_tail(self.stderr)}"
        )


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def java_command(
    java: str, classpath: Sequence[Path], main: str, *args: str, log_config: Path = LOG_CONFIG
) -> list[str]:
    """`java <small-heap flags> -cp <jars> main args...` logging as `log_config` says."""
    return [
        java,
        *JVM_FLAGS,
        f"-Dlog4j2.configurationFile={log_config}",
        "-cp",
        os.pathsep.join(str(jar) for jar in classpath),
        main,
        *args,
    ]


@dataclass(frozen=True)
class KafkaTools:
    java: str
    classpath: tuple[Path, ...]

    @classmethod
    def resolve(cls) -> KafkaTools:
        """The tools' jars (fetched once, then cached); maven.JvmUnavailable if they cannot be."""
        java = maven.require_java()
        coordinates = [
            f"org.apache.kafka:{name}:{maven.KAFKA_VERSION}"
            for name in ("kafka-tools", "kafka_2.13")
        ]
        return cls(java, tuple(maven.classpath(*coordinates, LOG_BRIDGE)))

    @classmethod
    def for_tests(cls) -> KafkaTools:
        """`resolve`, failing the calling test (never skipping) with what to install."""
        try:
            return cls.resolve()
        except maven.JvmUnavailable as missing:
            pytest.fail(f"Kafka CLI tools unavailable: {missing}", pytrace=False)

    def command(self, tool: str, *args: str) -> list[str]:
        return java_command(self.java, self.classpath, MAIN_CLASSES[tool], *args)

    def run(
        self,
        tool: str,
        *args: str,
        stdin: str | None = None,
        timeout: float = 60.0,
        check: bool = True,
    ) -> ToolResult:
        """Run `tool` (a key of MAIN_CLASSES) to completion; ToolFailed on error if `check`."""
        command = self.command(tool, *args)
        try:
            done = subprocess.run(
                command, input=stdin if stdin is not None else "", capture_output=True,
                text=True, encoding="utf-8", timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired as expired:
            partial = ToolResult(
                tuple(command), -1, _text(expired.stdout), _text(expired.stderr)
            )
            raise ToolFailed(f"{tool} timed out after {timeout}s\n{partial.describe()}") from None
        result = ToolResult(tuple(command), done.returncode, done.stdout, done.stderr)
        if check and result.code != 0:
            raise ToolFailed(f"{tool} failed\n{result.describe()}")
        return result


def _text(output: bytes | str | None) -> str:
    if output is None:
        return ""
    return output if isinstance(output, str) else output.decode("utf-8", "replace")
