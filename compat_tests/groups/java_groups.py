"""Compile and run `java/GroupScenarios.java` with the Java harness's jars and JVM flags."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from compat_tests.java.harness import (
    JVM_FLAGS,
    LOG_CONFIG,
    Events,
    HarnessFailed,
    find_jars,
    find_tool,
)
from strom.broker.testing.embedded import BrokerProcess

SOURCE = Path(__file__).resolve().parent / "java" / "GroupScenarios.java"


@dataclass(frozen=True)
class GroupJava:
    java: str
    classpath: str

    @classmethod
    def build(cls, out_dir: Path) -> GroupJava:
        """javac the scenarios (JavaUnavailable without a JDK or the client jars)."""
        jars = os.pathsep.join(str(j) for j in find_jars())
        javac, java = find_tool("javac"), find_tool("java")
        done = subprocess.run(
            [javac, "-encoding", "UTF-8", "-Xlint:all", "-d", str(out_dir), "-cp", jars, str(SOURCE)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
        return cls(java, os.pathsep.join([jars, str(out_dir)]))

    def command(self, bootstrap: str, scenario: str, topic: str, group: str) -> list[str]:
        return [
            self.java, *JVM_FLAGS, f"-Dlog4j2.configurationFile={LOG_CONFIG}",
            "-cp", self.classpath, "GroupScenarios", bootstrap, scenario, topic, group,
        ]  # fmt: skip

    def run(
        self, broker: BrokerProcess, scenario: str, topic: str, group: str, timeout: float = 120
    ) -> Events:
        done = subprocess.run(
            self.command(broker.bootstrap, scenario, topic, group),
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout,
        )  # fmt: skip
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not any(e["event"] == "done" for e in events):
            tail = "\n".join(done.stderr.splitlines()[-40:])
            broker_log = "\n".join(list(broker.output)[-30:])
            raise HarnessFailed(
                f"{scenario}: exit {done.returncode}\n{events[-5:]}\n{tail}\n--- broker ---\n{broker_log}"
            )
        return Events(events)


class JavaMember:
    """The `member` scenario as a child process, read line by line, killable with SIGKILL."""

    def __init__(self, harness: GroupJava, bootstrap: str, topic: str, group: str) -> None:
        self.process = subprocess.Popen(
            harness.command(bootstrap, "member", topic, group),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.owned: set[int] = set()
        self.consumed: set[tuple[int, int]] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            with self._lock:
                kind = event["event"]
                if kind in ("assigned", "revoked"):
                    parts = {
                        int(p) for p in event["partitions"].strip("[]").split(",") if p.strip()
                    }
                    self.owned = self.owned | parts if kind == "assigned" else self.owned - parts
                elif kind == "consumed":
                    self.consumed.add((int(event["partition"]), int(event["offset"])))

    def snapshot(self) -> tuple[set[int], set[tuple[int, int]]]:
        with self._lock:
            return set(self.owned), set(self.consumed)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._thread.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
