"""docker/: the compose files give configurations Strom accepts, the Dockerfile's files exist,
and the Grafana dashboard asks only for series a broker exports."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import yaml
from confluent_kafka import Producer

from strom.broker.process.container import container_properties
from strom.broker.testing.embedded import BrokerProcess
from strom.config import load_config

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def _environment(service: dict[str, object]) -> dict[str, str]:
    env = service["environment"]
    assert isinstance(env, dict)
    return {str(k): str(v) for k, v in env.items()}


def test_the_three_node_compose_file_configures_one_quorum() -> None:
    compose = yaml.safe_load((DOCKER / "compose-cluster.yaml").read_text())
    nodes = {name: s for name, s in compose["services"].items() if name.startswith("kafka-")}
    assert len(nodes) == 3
    voters = set()
    for name, service in nodes.items():
        properties, cluster_id = container_properties(_environment(service))
        config = load_config(extra=properties)
        assert f"kafka-{config.node_id}" == name
        voters.add(properties["controller.quorum.voters"])
        assert cluster_id == "4L6g3nShT-eMCtK--X86sw"
        assert config.metrics_endpoint == ("0.0.0.0", 9404)
    assert len(voters) == 1
    prometheus = yaml.safe_load((DOCKER / "monitoring" / "prometheus.yml").read_text())
    targets = prometheus["scrape_configs"][0]["static_configs"][0]["targets"]
    assert sorted(targets) == [f"{n}:9404" for n in sorted(nodes)]


def test_the_single_node_compose_file_and_the_image_defaults_are_valid() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    properties, _ = container_properties(_environment(compose["services"]["kafka"]))
    assert load_config(extra=properties).node_id == 1
    from strom.config.properties_file import read_properties_file

    defaults = read_properties_file(str(DOCKER / "server.properties"))
    properties, _ = container_properties({}, None, defaults)
    assert load_config(extra=properties).node_id == 1


def test_the_dockerfile_copies_files_that_exist_and_runs_as_a_user() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (?:--\S+ )*(docker/\S+) ", dockerfile, re.M):
        assert (DOCKER.parent / source).exists(), source
    assert re.search(r"^USER appuser$", dockerfile, re.M)
    assert "HEALTHCHECK" in dockerfile
    assert (DOCKER / "run").stat().st_mode & 0o111


def test_the_dashboard_asks_for_series_a_broker_exports(tmp_path: Path) -> None:
    dashboard = json.loads(
        (DOCKER / "monitoring" / "grafana" / "dashboards" / "strom-kafka.json").read_text()
    )
    wanted = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"\bkafka_[a-z_]+", target["expr"])
    }
    assert len(wanted) > 30
    with BrokerProcess(tmp_path / "data", {"metrics.listener": "http://127.0.0.1:0"}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("t", b"x")
        assert producer.flush(20) == 0
        del producer
        with urllib.request.urlopen(
            f"http://{broker.metrics_address}/metrics", timeout=10
        ) as answer:
            text = answer.read().decode()
    exported = set(re.findall(r"^(kafka_[a-z_]+)[{ ]", text, re.M))
    for typed in re.findall(r"^# TYPE (kafka_[a-z_]+) (\w+)", text, re.M):
        name, _kind = typed
        exported |= {name, f"{name}_total", f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    quorum_only = {
        n for n in wanted if n.startswith("kafka_server_raftmetrics_")
    }  # tests/faults checks those
    assert wanted - quorum_only <= exported, sorted(wanted - quorum_only - exported)
