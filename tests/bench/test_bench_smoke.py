"""Smoke runs of the broker benchmarks, so the harness cannot rot: a few thousand messages.

Nothing here is timed or compared; each run must only complete with every phase accounted
for. `compare.py` includes Tansu when its binary is installed (`pip install -e '.[bench]'`,
as `.ci/run` does) and runs against Strom alone otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import broker_bench, compare, scaling
from bench.harness import StromSpec, cpu_seconds, rss_bytes, start_broker, tansu_binary


def _tansu_available() -> bool:
    try:
        tansu_binary()
    except FileNotFoundError:
        return False
    return True


def test_harness_reads_the_broker_process(tmp_path: Path) -> None:
    with start_broker(StromSpec(), tmp_path) as broker:
        assert 0 < broker.startup_s < 30
        assert broker.idle.rss > 1_000_000
        assert cpu_seconds(broker.pid) > 0  # importing and starting costs some CPU
        assert rss_bytes(broker.pid) > 1_000_000
        assert broker.alive()
        pid = broker.pid
    assert not Path(f"/proc/{pid}").exists() or not broker.alive()


def test_broker_bench_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "broker_bench.json"
    assert broker_bench.main(["--quick", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc == json.loads(capsys.readouterr().out)
    assert len(doc["results"]) == 8  # 2 sizes x 2 partition counts x 2 acks settings
    for row in doc["results"]:
        for phase in ("produce", "consume"):
            result = row[phase]
            assert result["error"] is None, (row["workload"], phase, result["error"])
            assert result["messages"] == row["workload"]["count"]
            assert result["msgs_per_s"] > 0
            assert result["broker_cpu_s"] >= 0
    assert doc["startup_s"] > 0
    assert doc["rss_idle_bytes"] > 0


def test_compare_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    brokers = "strom,tansu,strom-fsync" if _tansu_available() else "strom,strom-fsync"
    out = tmp_path / "compare.json"
    argv = ["--quick", "--brokers", brokers, "--latency-seconds", "0.2", "--json", str(out)]
    assert compare.main(argv) == 0
    table = capsys.readouterr().out
    assert "## Throughput" in table
    assert "## Targets" in table
    doc = json.loads(out.read_text())
    runs = {run["variant"]: run for run in doc["runs"]}
    assert set(runs) == set(brokers.split(","))
    for variant, run in runs.items():
        assert run["error"] is None, (variant, run["error"])
        assert run["startup_s"] > 0
        if variant == "tansu":
            continue  # a peer's gaps are recorded as n/a, not failures
        failed = {key: p["error"] for key, p in run["phases"].items() if p["error"]}
        assert not failed, (variant, failed)
    # 16 throughput workloads (produce + consume) and two latency runs
    assert len(runs["strom"]["phases"]) == 16 * 2 + 2
    assert len(runs["strom-fsync"]["phases"]) == 16 + 2


def test_scaling_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scaling.json"
    assert scaling.main(["--quick", "--json", str(out)]) == 0
    assert "## Partitions" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert [r["partitions"] for r in doc["partitions"]] == [1, 10, 100]
    for row in doc["partitions"]:
        assert "error" not in row, row
        assert row["unacknowledged"] == 0
        # one fd per partition (its active segment's .log) plus the broker's own
        assert row["partitions"] <= row["open_files_after_create"] < 2 * row["partitions"] + 20
    assert [r["connections"] for r in doc["connections"]] == [1, 10, 50]
    positions = doc["fetch"]["positions"]
    assert all(p["response_records_bytes"] > 0 for p in positions.values())
    for row in doc["recovery"]:
        assert row["after_kill9_log_ready_s"] >= row["after_kill9_metadata_s"] > 0


def test_snapshot_load_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import snapshot_load

    assert snapshot_load.main(["--partitions", "2000", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "2000 partitions" in out
    assert "ratio decode_snapshot / generic" in out
