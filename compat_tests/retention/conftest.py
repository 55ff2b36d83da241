"""Fixtures for the retention/compaction compatibility tests.

`cleaning_broker`: one `strom serve` child per module whose retention checks and cleaner run
every 100 ms, so tests see them act within seconds. `retention_java`: the shared Java harness
(compat_tests/java/src) compiled together with this directory's RetentionScenarios.java, once
per session; a missing JDK or missing client jars fail under CI and skip elsewhere, as there.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat_tests.java.harness import (
    JVM_FLAGS,
    LOG_CONFIG,
    JavaHarness,
    JavaUnavailable,
    find_jars,
    find_tool,
    harness_sources,
)
from strom.broker.testing.embedded import BrokerProcess

HERE = Path(__file__).resolve().parent
FAST = {
    "log.retention.check.interval.ms": "100",
    "log.cleaner.backoff.ms": "100",
}


@dataclass(frozen=True)
class RetentionHarness(JavaHarness):
    """JavaHarness whose entry point is RetentionScenarios (which falls back to Harness)."""

    def command(self, bootstrap: str, scenario: str, args: dict[str, object]) -> list[str]:
        rendered = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in args.items()]
        return [
            self.java,
            *JVM_FLAGS,
            f"-Dlog4j2.configurationFile={LOG_CONFIG}",
            "-cp",
            self.classpath,
            "RetentionScenarios",
            bootstrap,
            scenario,
            *rendered,
        ]


def build(out_dir: Path) -> RetentionHarness:
    jars = os.pathsep.join(str(j) for j in find_jars())
    javac, java = find_tool("javac"), find_tool("java")
    sources = sorted(str(s) for s in [*harness_sources("3.9"), *HERE.glob("*.java")])
    done = subprocess.run(
        [javac, "-encoding", "UTF-8", "-Xlint:all", "-d", str(out_dir), "-cp", jars, *sources],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return RetentionHarness(
        java=java, classpath=os.pathsep.join([jars, str(out_dir)]), client="3.9"
    )


@pytest.fixture(scope="session")
def retention_java(tmp_path_factory: pytest.TempPathFactory) -> RetentionHarness:
    try:
        return build(tmp_path_factory.mktemp("retention-java"))
    except JavaUnavailable as missing:
        pytest.fail(f"Java client harness unavailable: {missing}", pytrace=False)


@pytest.fixture(scope="module")
def cleaning_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("strom") / "data", FAST)
    with broker:
        yield broker
