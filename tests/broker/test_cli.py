"""`strom serve`: config file, overrides, bad keys, the startup line, SIGTERM."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strom.broker.process.cli", *args], capture_output=True, text=True, timeout=30
    )


def test_unknown_key_is_refused_by_name(tmp_path: Path) -> None:
    result = run_cli("serve", "--override", "log.dirz=/tmp/x")
    assert result.returncode == 2
    assert "log.dirz" in result.stderr


def test_invalid_value_names_key_and_expectation(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("# a Kafka-style file\nnum.partitions=many\n")
    result = run_cli("serve", "--config", str(config))
    assert result.returncode == 2
    assert "num.partitions" in result.stderr
    assert "many" in result.stderr


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    result = run_cli("serve", "--config", str(tmp_path / "nope.properties"))
    assert result.returncode == 2
    assert "nope.properties" in result.stderr


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("strom ")


def test_config_file_and_overrides_and_startup_line(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={tmp_path / 'from-file'}\nnum.partitions=3\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "strom.broker.process.cli", "serve", "--config", str(config),
         "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        for line in process.stderr:
            if "started" in line:
                break
        assert "Strom" in line
        assert "listeners=PLAINTEXT://127.0.0.1:" in line
        assert str(tmp_path / "from-file") in line
        started = time.monotonic()
        process.terminate()
        assert process.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
    finally:
        process.stderr.close()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (tmp_path / "from-file" / ".kafka_cleanshutdown").exists()
