"""`metrics.listener` on a real `strom serve`: Kafka's metric names after real traffic, the
health checks, and the refusals at start-up."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from strom.broker.testing.embedded import BrokerProcess, child_environment


def _get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _value(text: str, series: str) -> float:
    """The value of one series (name and labels exactly as exposed)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no series {series} in:\n{text}")


def test_metrics_after_produce_and_consume(tmp_path: Path) -> None:
    overrides = {"metrics.listener": "http://127.0.0.1:0", "num.partitions": "2"}
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        assert broker.metrics_address
        # the group coordinator starts on first need; until then its series report none
        status, text = _get(broker.metrics_address, "/metrics")
        assert status == 200
        assert _value(text, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 0
        assert _value(text, "kafka_server_group_coordinator_metrics_group_rebalance_total") == 0
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            producer.produce("orders", key=str(i % 2).encode(), value=b"x" * 100)
        assert producer.flush(20) == 0
        del producer
        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": "billing",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        consumer.subscribe(["orders"])
        seen = 0
        for _ in range(200):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen += 1
            if seen == 10:
                break
        assert seen == 10
        status, text = _get(broker.metrics_address, "/metrics")
        consumer.close()
        assert status == 200
        assert _value(text, "kafka_server_brokertopicmetrics_messagesin_total") == 10
        assert (
            _value(text, 'kafka_server_brokertopicmetrics_messagesin_total{topic="orders"}') == 10
        )
        assert _value(text, 'kafka_server_brokertopicmetrics_bytesin_total{topic="orders"}') > 1000
        assert _value(text, 'kafka_server_brokertopicmetrics_bytesout_total{topic="orders"}') > 1000
        assert _value(text, "kafka_server_replicamanager_leadercount") >= 2
        assert _value(text, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert _value(text, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert _value(text, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert _value(text, 'kafka_log_log_numlogsegments{partition="0",topic="orders"}') == 1
        sizes = [
            _value(text, f'kafka_log_log_size{{partition="{p}",topic="orders"}}') for p in (0, 1)
        ]
        assert sum(sizes) > 1000
        assert _value(text, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
        assert _value(text, "kafka_server_group_coordinator_metrics_group_rebalance_total") >= 1
        assert re.search(
            r'^kafka_network_requestmetrics_totaltimems_bucket\{le="\+Inf",request="Produce"\} \d',
            text, re.M,
        )  # fmt: skip
        assert re.search(
            r'^kafka_network_requestmetrics_requests_total\{request="Fetch",', text, re.M
        )
        idle = _value(text, "kafka_network_socketserver_networkprocessoravgidle_percent")
        assert 0 <= idle <= 1

        status, body = _get(broker.metrics_address, "/readyz")
        assert status == 200, body
        assert json.loads(body)["ready"] is True
        assert _get(broker.metrics_address, "/healthz") == (200, "ok\n")
        assert _get(broker.metrics_address, "/nope")[0] == 404


def test_openmetrics_when_asked(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", {"metrics.listener": "http://127.0.0.1:0"}) as broker:
        request = urllib.request.Request(
            f"http://{broker.metrics_address}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
            assert answer.read().decode().rstrip().endswith("# EOF")


def _serve(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "strom", "serve",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", f"log.dirs={tmp_path / 'data'}"]  # fmt: skip
    for override in overrides:
        args += ["--override", override]
    return subprocess.run(args, capture_output=True, text=True, timeout=30, env=child_environment())


@pytest.mark.parametrize("value", ["9404", "https://0.0.0.0:9404", "http://host", "http://:70000"])
def test_a_malformed_metrics_listener_is_refused_in_one_line(tmp_path: Path, value: str) -> None:
    done = _serve(tmp_path, f"metrics.listener={value}")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "metrics.listener" in lines[0]
    assert "http://host:port" in lines[0]


def test_a_metrics_port_in_use_stops_start_up(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = _serve(tmp_path, f"metrics.listener=http://127.0.0.1:{port}")
    assert done.returncode == 1
    assert "cannot listen on metrics.listener" in done.stderr.strip().splitlines()[-1]
