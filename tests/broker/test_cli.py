"""`strom serve`: config file, overrides, bad keys, the startup line, SIGTERM."""

from __future__ import annotations

import gc
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from strom.coordinator.metadata.kraft_checkpoint import decode_bootstrap
from strom.storage.meta_properties import read_bootstrap


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


def test_an_unknown_replica_selector_class_is_refused_in_one_line(tmp_path: Path) -> None:
    """KIP-392: only Kafka's two selector classes exist here; any other fails closed."""
    config = tmp_path / "server.properties"
    config.write_text("replica.selector.class=com.example.NearestSelector\n")
    result = run_cli("serve", "--config", str(config))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "replica.selector.class" in result.stderr
    assert "RackAwareReplicaSelector" in result.stderr


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    result = run_cli("serve", "--config", str(tmp_path / "nope.properties"))
    assert result.returncode == 2
    assert "nope.properties" in result.stderr


def test_serve_runs_with_the_collector_on_and_its_loaded_modules_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from strom.broker.process import cli, serve

    seen: list[tuple[bool, int]] = []

    def run(args: object) -> int:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return 0

    monkeypatch.setattr(serve, "run", run)
    try:
        assert cli.main(["serve"]) == 0
    finally:
        gc.unfreeze()
    [(enabled, frozen)] = seen
    assert enabled
    assert frozen > 0


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


@contextmanager
def serving(*overrides: str) -> Iterator[str]:
    """`strom serve` on port 0 with `overrides` (key=value), until its startup line; yields the
    line, then stops it with SIGTERM and checks it exited cleanly."""
    args = [sys.executable, "-m", "strom", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0"]
    for override in overrides:
        args += ["--override", override]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    started = ""
    try:
        for line in process.stderr:
            if "started" in line:
                started = line
                break
        assert started, "strom serve exited before its startup line"
        yield started
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert process.returncode == 0



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
    with serving(f"log.dirs={data}"):
        result = run_cli("serve", "--override", f"log.dirs={data}",
                         "--override", "listeners=PLAINTEXT://127.0.0.1:0")  # fmt: skip
        assert result.returncode == 1
        line = _one_error_line(result)
        assert f"{data.resolve()} is in use by another process" in line
        assert ".lock" in line


def test_a_sasl_listener_enabling_kerberos_stops_start_up(tmp_path: Path) -> None:
    """Fail closed: GSSAPI (Kafka's default mechanism) is Kerberos, which Strom does not serve."""
    result = run_cli("serve", "--override", f"log.dirs={tmp_path / 'data'}",
                     "--override", "listeners=SASL_SSL://127.0.0.1:0",
                     "--override", "advertised.listeners=SASL_SSL://127.0.0.1:0",
                     "--override", "inter.broker.listener.name=SASL_SSL")  # fmt: skip
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "SASL listener SASL_SSL enables GSSAPI" in line
    assert not (tmp_path / "data").exists()


def test_a_tls_listener_without_a_key_store_stops_start_up(tmp_path: Path) -> None:
    result = run_cli("serve", "--override", f"log.dirs={tmp_path / 'data'}",
                     "--override", "listeners=SSL://127.0.0.1:0",
                     "--override", "inter.broker.listener.name=SSL")  # fmt: skip
    assert result.returncode == 1
    line = _one_error_line(result)
    assert "listener SSL needs a key store: set ssl.keystore.location" in line


# --- strom format, strom random-uuid, and what start-up makes of formatted storage -----------


def _meta(directory: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in directory.joinpath("meta.properties").read_text()
             .splitlines() if "=" in line and not line.startswith("#"))  # fmt: skip
    return dict(pairs)


def test_random_uuid_prints_a_kafka_uuid() -> None:
    from strom.storage.meta_properties import parse_kafka_uuid

    first, second = run_cli("random-uuid"), run_cli("random-uuid")
    assert first.returncode == 0
    cluster_id = first.stdout.strip()
    assert len(cluster_id) == 22
    parse_kafka_uuid(cluster_id)  # Kafka's Uuid.fromString accepts it
    assert cluster_id != second.stdout.strip()


def test_format_writes_every_directory_like_kafka_storage(tmp_path: Path) -> None:
    cluster_id = run_cli("random-uuid").stdout.strip()
    config = tmp_path / "server.properties"
    config.write_text(
        f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}\nmetadata.log.dir={tmp_path / 'meta'}\n"
    )
    result = run_cli("format", "-c", str(config), "-t", cluster_id)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Formatting data directory {tmp_path / 'a'} with metadata.version 4.0-IV3.",
        f"Formatting data directory {tmp_path / 'b'} with metadata.version 4.0-IV3.",
        f"Formatting metadata directory {tmp_path / 'meta'} with metadata.version 4.0-IV3.",
    ]
    metas = [_meta(tmp_path / d) for d in ("a", "b", "meta")]
    assert {(m["version"], m["cluster.id"], m["node.id"]) for m in metas} == {
        ("1", cluster_id, "1")
    }
    assert len({m["directory.id"] for m in metas}) == 3  # each directory its own id
    assert _bootstrap_levels(tmp_path / "meta") == {"metadata.version": 25}
    assert not (tmp_path / "a" / "bootstrap.checkpoint").exists()

    again = run_cli("format", "-c", str(config), "-t", cluster_id)
    assert again.returncode == 1
    assert again.stderr.strip() == (
        f"Log directory {tmp_path / 'a'} is already formatted. Use --ignore-formatted to "
        "ignore this directory and format the others."
    )
    ignored = run_cli("format", "-c", str(config), "-t", cluster_id, "--ignore-formatted")
    assert ignored.returncode == 0
    assert ignored.stdout.strip() == "All of the log directories are already formatted."
    other = run_cli("format", "-c", str(config), "-t", run_cli("random-uuid").stdout.strip(), "-g")
    assert other.returncode == 1
    assert "belongs to another cluster" in other.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-t", "not-a-uuid"], "Cluster ID string not-a-uuid does not appear to be a valid UUID"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--add-scram", "SCRAM-SHA-1=[name=a,password=b]"],
         "unknown SCRAM mechanism SCRAM-SHA-1"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--add-scram", "SCRAM-SHA-256=[name=a,password=b,iterations=10]"],
         "Too few iterations"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--add-scram", "SCRAM-SHA-256=[password=b]"],
         "--add-scram needs name=NAME"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--initial-controllers",
          "1@127.0.0.1:9093:AAAAAAAAAAAAAAAAAAAAAA,2@127.0.0.1:9095:AQAAAAAAAAAAAAAAAAAAAA"],
         "dynamic controller quorums (KIP-853) are not implemented yet"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--override", "controller.quorum.voters=1@127.0.0.1:9093",
          "--override", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
          "--override", "controller.listener.names=CONTROLLER", "--standalone"],
         "You cannot specify --standalone or --initial-controllers when "
         "controller.quorum.voters is set"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--feature", "eligible.leader.replicas.version"],
         "Can't parse feature=eligible.leader.replicas.version"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--feature", "metadata.version=20"],
         "--feature metadata.version is refused"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--feature", "share.version=1"],
         "unsupported feature: share.version"),
        (["-t", "AAAAAAAAAAAAAAAAAAAAAA", "--feature", "eligible.leader.replicas.version=2"],
         "unsupported eligible.leader.replicas.version level 2"),
    ],
)  # fmt: skip
def test_format_refusals_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_cli("format", "--override", f"log.dirs={tmp_path / 'data'}", *args)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "data" / "meta.properties").exists()


def test_format_finalizes_a_feature(tmp_path: Path) -> None:
    cluster_id = run_cli("random-uuid").stdout.strip()
    result = run_cli(
        "format", "--override", f"log.dirs={tmp_path / 'data'}",
        "--override", f"metadata.log.dir={tmp_path / 'meta'}", "-t", cluster_id,
        "--feature", "eligible.leader.replicas.version=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert _bootstrap_levels(tmp_path / "meta") == {
        "metadata.version": 25,
        "eligible.leader.replicas.version": 1,
    }


def test_a_formatted_node_serves_its_cluster_id(tmp_path: Path) -> None:
    cluster_id = run_cli("random-uuid").stdout.strip()
    data = tmp_path / "data"
    assert run_cli("format", "--override", f"log.dirs={data}", "-t", cluster_id).returncode == 0
    with serving(f"log.dirs={data}") as line:
        assert "Strom" in line
    assert _meta(data)["cluster.id"] == cluster_id  # kept, not replaced

    other = run_cli("serve", "--override", f"log.dirs={data}",
                    "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                    "--override", "cluster.id=another-cluster")  # fmt: skip
    assert other.returncode == 1
    line = _one_error_line(other)
    assert f"cluster.id another-cluster does not match {cluster_id} stored in" in line


def test_directories_of_two_clusters_refuse_to_start(tmp_path: Path) -> None:
    for name in ("a", "b"):
        cluster_id = run_cli("random-uuid").stdout.strip()
        assert run_cli("format", "--override", f"log.dirs={tmp_path / name}",
                       "-t", cluster_id).returncode == 0  # fmt: skip
    result = run_cli("serve", "--override", f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}",
                     "--override", "listeners=PLAINTEXT://127.0.0.1:0")  # fmt: skip
    assert result.returncode == 1
    assert "must belong to one cluster" in _one_error_line(result)


def test_first_start_formats_every_directory(tmp_path: Path) -> None:
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    with serving(f"log.dirs={dirs}", "cluster.id=my-cluster"):
        pass
    a, b = _meta(tmp_path / "a"), _meta(tmp_path / "b")
    assert a["cluster.id"] == b["cluster.id"] == "my-cluster"
    assert a["directory.id"] != b["directory.id"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["controller.quorum.bootstrap.servers=127.0.0.1:19095"],
         "dynamic controller quorums (KIP-853) are not implemented yet"),
        (["process.roles=broker", "controller.quorum.bootstrap.servers=127.0.0.1:19093"],
         "dynamic controller quorums (KIP-853) are not implemented yet"),
        (["controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19095,3@127.0.0.1:19097"],
         "is not formatted (no meta.properties), and a member of a multi-node quorum never "
         "formats itself"),
    ],
)  # fmt: skip
def test_what_a_quorum_member_cannot_run_stops_start_up(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    """Fail closed: a dynamic quorum (not implemented), or a quorum member that would make up a
    cluster id of its own (it would split from its peers)."""
    base = ["listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
            "controller.listener.names=CONTROLLER", f"log.dirs={tmp_path / 'data'}"]  # fmt: skip
    if "process.roles=broker" in overrides:
        base[0] = "listeners=PLAINTEXT://127.0.0.1:0"
    args = [arg for item in (*base, *overrides) for arg in ("--override", item)]
    result = run_cli("serve", *args)
    assert result.returncode == 1
    line = _one_error_line(result)
    assert message in line
    assert not (tmp_path / "data" / "meta.properties").exists()


def test_initial_controllers_names_the_metadata_directory(tmp_path: Path) -> None:
    """KIP-853: the metadata directory gets the directory id --initial-controllers gives it."""
    cluster_id, directory_id = (run_cli("random-uuid").stdout.strip() for _ in range(2))
    result = run_cli(
        "format", "-t", cluster_id,
        "--override", f"log.dirs={tmp_path / 'data'}",
        "--override", f"metadata.log.dir={tmp_path / 'meta'}",
        "--override", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "--override", "controller.listener.names=CONTROLLER",
        "--initial-controllers", f"1@127.0.0.1:9093:{directory_id}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert _meta(tmp_path / "meta")["directory.id"] == directory_id
    assert _meta(tmp_path / "data")["directory.id"] != directory_id


def _bootstrap_levels(directory: Path) -> dict[str, int] | None:
    data = read_bootstrap(directory)
    return None if data is None else decode_bootstrap(data, "bootstrap.checkpoint").levels
