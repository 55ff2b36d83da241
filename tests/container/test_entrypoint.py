"""The image's entrypoint run as a process, without a container: apache/kafka's environment
in, a serving broker out (formatted, `Transitioning from RECOVERY to RUNNING` logged, as
Testcontainers waits for), and the healthcheck's answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import child_environment
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.container.test_environment import TESTCONTAINERS_ENV


def _entrypoint(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "strom.broker.process.container", "run", *args,
         "--mounted-config-dir", str(tmp_path / "mounted"),
         "--final-config-dir", str(tmp_path / "final"), "--defaults", str(tmp_path / "none")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**{k: v for k, v in child_environment().items() if not k.startswith("KAFKA_")}, **env},
    )  # fmt: skip


def _wait_for(process: subprocess.Popen[str], text: str, lines: deque[str]) -> threading.Thread:
    """Read the process's output on a thread until `text` appears; the thread reads on to the
    end (join it, then close the pipe: `_stop`)."""
    found = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip())
            if text in line:
                found.set()
        found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert found.wait(60), "\n".join(lines)
    assert process.poll() is None, "\n".join(lines)
    return reader


def _stop(process: subprocess.Popen[str], reader: threading.Thread | None) -> int:
    process.send_signal(signal.SIGTERM)
    code = process.wait(30)
    if reader is not None:
        reader.join(10)
    assert process.stdout is not None
    process.stdout.close()
    return code


def _brokers(address: str) -> list[int]:
    async def ask() -> list[int]:
        client = await KafkaClient.connect(address)
        response = await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)
        await client.aclose()
        return [b.node_id for b in response.brokers]

    return trio.run(ask)


def test_testcontainers_environment_starts_a_broker(tmp_path: Path) -> None:
    env = {**TESTCONTAINERS_ENV,
           "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
           "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
           "KAFKA_LOG_DIRS": str(tmp_path / "data"),
           "KAFKA_METRICS_LISTENER": "http://127.0.0.1:0"}  # fmt: skip
    process = _entrypoint(tmp_path, env)
    lines: deque[str] = deque(maxlen=200)
    reader = None
    try:
        reader = _wait_for(process, "Transitioning from RECOVERY to RUNNING", lines)
        started = next(line for line in lines if "started: node.id=1" in line)
        address = started.split("listeners=PLAINTEXT://", 1)[1].split(",", 1)[0]
        assert _brokers(address) == [1]
        final = (tmp_path / "final" / "server.properties").read_text()
        assert "inter.broker.listener.name=BROKER" in final
        assert (tmp_path / "data" / "meta.properties").read_text().count(
            "4L6g3nShT-eMCtK--X86sw"
        ) == 1
        # the metrics listener's port is known only from the log: point the check at it
        metrics = started.split(" metrics=http://", 1)[1].split('"', 1)[0]
        check = tmp_path / "check.properties"
        check.write_text(
            final.replace(
                "metrics.listener=http://127.0.0.1:0", f"metrics.listener=http://{metrics}"
            )
        )
        health = subprocess.run(
            [sys.executable, "-m", "strom.broker.process.container", "healthcheck", "--config", str(check)],
            capture_output=True, text=True, timeout=60, env=child_environment(),
        )  # fmt: skip
        assert health.returncode == 0, health.stderr
    finally:
        assert _stop(process, reader) == 0


def test_the_healthcheck_fails_when_nothing_answers(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("listeners=PLAINTEXT://127.0.0.1:1\n")
    health = subprocess.run(
        [sys.executable, "-m", "strom.broker.process.container", "healthcheck", "--config", str(config)],
        capture_output=True, text=True, timeout=60, env=child_environment(),
    )  # fmt: skip
    assert health.returncode == 1
    assert health.stderr.startswith("strom-container: not ready")


def test_arguments_are_variables_and_a_restart_keeps_the_formatted_storage(tmp_path: Path) -> None:
    env = {"KAFKA_NODE_ID": "3", "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0",
           "KAFKA_LOG_DIRS": str(tmp_path / "data")}  # fmt: skip
    for _ in range(2):
        process = _entrypoint(tmp_path, env, "CLUSTER_ID=MkU3OEVBNTcwNTJENDM2Qg")
        lines: deque[str] = deque(maxlen=200)
        reader = None
        try:
            reader = _wait_for(process, "Transitioning from RECOVERY to RUNNING", lines)
        finally:
            assert _stop(process, reader) == 0
    assert "MkU3OEVBNTcwNTJENDM2Qg" in (tmp_path / "data" / "meta.properties").read_text()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KAFKA_PROCESS_ROLES": "controller", "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://x:1"},
         "not supported on a KRaft controller"),
        ({"KAFKA_NUM_PARTITIONS": "many"}, "num.partitions"),
        # apache/kafka's keystore-file convenience variables are not mapped: refused, not ignored
        ({"KAFKA_SSL_KEYSTORE_FILENAME": "ks.jks"}, "ssl.keystore.filename"),
    ],
)  # fmt: skip
def test_a_bad_environment_stops_in_one_line(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    process = _entrypoint(tmp_path, {**env, "KAFKA_LOG_DIRS": str(tmp_path / "d")})
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith("strom-container: ")
    assert message in lines[0]
    assert not os.path.exists(tmp_path / "d" / "meta.properties")
