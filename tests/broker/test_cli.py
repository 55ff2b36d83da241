"""`strom serve`: config file, overrides, bad keys, the startup line, SIGTERM."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strom", *args], capture_output=True, text=True, timeout=30
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


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """A failed start prints exactly one logfmt ERROR line, and no traceback."""
    errors = [line for line in result.stderr.splitlines() if "level=ERROR" in line]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert errors[0].startswith("ts=")
    assert "logger=strom.broker" in errors[0]
    return errors[0]


def test_port_in_use_is_one_line_naming_the_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--override", f"log.dirs={tmp_path / 'data'}",
                         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}")  # fmt: skip
    assert result.returncode == 1
    line = _one_error_line(result)
    assert f"cannot listen on PLAINTEXT://127.0.0.1:{port}" in line
    assert "change 'listeners'" in line


def test_a_file_where_the_data_directory_should_be_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("not a directory")
    result = run_cli("serve", "--override", f"log.dirs={tmp_path / 'data'}",
                     "--override", "listeners=PLAINTEXT://127.0.0.1:0")  # fmt: skip
    assert result.returncode == 1
    line = _one_error_line(result)
    assert str(tmp_path / "data") in line
    assert "log.dirs" in line


def test_a_second_broker_on_the_same_data_directory_is_refused(tmp_path: Path) -> None:
    """Kafka holds `.lock` in each log dir; two processes appending would corrupt the logs."""
    data = tmp_path / "data"
    first = subprocess.Popen(
        [sys.executable, "-m", "strom", "serve", "--override", f"log.dirs={data}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert first.stderr is not None
    try:
        for line in first.stderr:
            if "started" in line:
                break
        result = run_cli("serve", "--override", f"log.dirs={data}",
                         "--override", "listeners=PLAINTEXT://127.0.0.1:0")  # fmt: skip
        assert result.returncode == 1
        line = _one_error_line(result)
        assert f"{data.resolve()} is in use by another process" in line
        assert ".lock" in line
    finally:
        first.terminate()
        first.communicate(timeout=30)
    assert first.returncode == 0


def test_a_tls_listener_stops_start_up(tmp_path: Path) -> None:
    """Fail closed: no plaintext port behind a configuration that asks for TLS."""
    result = run_cli("serve", "--override", f"log.dirs={tmp_path / 'data'}",
                     "--override", "listeners=SSL://127.0.0.1:0",
                     "--override", "advertised.listeners=SSL://127.0.0.1:0",
                     "--override", "inter.broker.listener.name=SSL")  # fmt: skip
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "listener SSL uses security protocol SSL, which is refused" in line
    assert not (tmp_path / "data").exists()
