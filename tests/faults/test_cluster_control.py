"""The cluster fixture's control API on a real three-node cluster: leadership moves, kills and
restarts, isolation, injected errors, waiting for a group, and each node's metrics and
readiness while it happens."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.broker.testing.pytest_plugin import StartCluster


def _get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _series(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}")


def test_control_api_on_a_replicated_cluster(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(
        combined=3, partitionable=True, overrides={"metrics.listener": "http://127.0.0.1:0"}
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 3)])["orders"].result(30)
    leader = cluster.leader("orders", 0)

    # every node is ready, and its metrics show the quorum
    for node in cluster.nodes:
        status, body = _get(node.metrics_address, "/readyz")
        assert status == 200, body
        text = _get(node.metrics_address, "/metrics")[1]
        assert _series(text, "kafka_server_raftmetrics_current_epoch") >= 1
        assert _series(text, "kafka_server_raftmetrics_current_leader") >= 1

    # move the leadership, as an operator does
    target = next(n.node_id for n in cluster.nodes if n.node_id != leader)
    cluster.move_leader("orders", 0, to=target)
    assert cluster.leader("orders", 0) == target
    active = [
        n for n in cluster.nodes
        if _series(_get(n.metrics_address, "/metrics")[1],
                   "kafka_controller_kafkacontroller_activecontrollercount") == 1
    ]  # fmt: skip
    assert len(active) == 1
    elections = _series(
        _get(active[0].metrics_address, "/metrics")[1],
        "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
    )
    assert elections >= 1

    # an application's producer rides through injected errors on every broker
    cluster.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic="orders")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    producer.produce("orders", value=b"one")
    assert producer.flush(30) == 0

    # kill the leader: another takes over; its partitions are under-replicated until it returns
    cluster.kill(target)
    new_leader = cluster.leader("orders", 0, other_than=target)
    survivor = cluster.node(new_leader)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = _get(survivor.metrics_address, "/metrics")[1]
        if _series(text, "kafka_server_replicamanager_underreplicatedpartitions") >= 1:
            break
        time.sleep(0.1)
    assert _series(text, "kafka_server_replicamanager_underreplicatedpartitions") >= 1
    producer.produce("orders", value=b"two")
    assert producer.flush(30) == 0
    del producer
    cluster.restart(target)
    status, body = _get(cluster.node(target).metrics_address, "/readyz")
    assert status == 200, body
    assert json.loads(body)["checks"]["unfenced"] is True

    # a consumer group reaches Stable; isolate a node and heal it
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "billing",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["orders"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message.value())
    assert seen == [b"one", b"two"]
    cluster.wait_for_group("billing", "Stable")
    consumer.close()
    cluster.wait_for_group("billing", "Empty")

    cluster.isolate(leader)
    cluster.heal()
    cluster.wait_for_brokers()
