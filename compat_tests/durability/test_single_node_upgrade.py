"""Upgrade: `strom serve` starts on a data directory an older Strom's single node wrote.

That node kept its own metadata log; today's single node is a one-voter Raft quorum on the
cluster's store, and migrates the old log once at start-up (docs/metadata.md). The directory is
`tests/controller/fixtures/single-node-log/`, written by Strom as of commit 1934506 (how: in
`make_single_node_log.py.txt` beside it). A stock client (confluent-kafka) then finds the
topics, their configs, the broker's dynamic config, the consumer group's committed offsets and
every record; the node keeps working, and starts again without migrating twice.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, ConsumerGroupTopicPartitions, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.ck import ConfigResource, ResourceType
from strom.broker.testing.embedded import BrokerProcess

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "controller" / "fixtures"
OVERRIDES = {"offsets.topic.num.partitions": "1"}  # as the old node ran


def _configs(bootstrap: str, kind: ResourceType, name: str) -> dict[str, str]:
    admin = ck.admin(bootstrap)
    [future] = admin.describe_configs([ConfigResource(kind, name)]).values()
    return {k: v.value for k, v in ck.result(future).items() if not v.is_default}


def _check(broker: BrokerProcess) -> None:
    admin = ck.admin(broker.bootstrap)
    listed = admin.list_topics(timeout=10).topics
    assert {"__consumer_offsets", "late", "orders"} <= set(listed)
    assert "profiles" not in listed  # deleted after the snapshot
    assert len(listed["orders"].partitions) == 3
    assert {"retention.ms": "123456789", "segment.ms": "3600000"}.items() <= _configs(
        broker.bootstrap, ResourceType.TOPIC, "orders"
    ).items()
    assert _configs(broker.bootstrap, ResourceType.BROKER, "1")["log.retention.ms"] == "604800001"

    [future] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("billing")]
    ).values()
    committed = {(p.topic, p.partition): p.offset for p in ck.result(future).topic_partitions}
    assert committed == {("orders", 0): 7, ("orders", 1): 9, ("orders", 2): 4}

    consumer = ck.consumer(broker.bootstrap)
    try:
        consumer.assign([TopicPartition("orders", p, OFFSET_BEGINNING) for p in range(3)])
        values = sorted(r.value or b"" for r in ck.consume(consumer, 30))
    finally:
        consumer.close()
    assert values == sorted(f"order-{i}".encode() for i in range(30))


def test_a_data_directory_of_the_old_single_node_is_migrated_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "single-node-log", data)
    with BrokerProcess(data, OVERRIDES) as broker:
        assert any("migrated the single-node metadata log" in line for line in broker.output)
        _check(broker)
        ck.create_topic(ck.admin(broker.bootstrap), "after-upgrade", 2)
        seen = len(broker.output)
        broker.restart()
        assert not any("migrated" in line for line in list(broker.output)[seen:])
        assert "after-upgrade" in ck.admin(broker.bootstrap).list_topics(timeout=10).topics
    assert (data / "__cluster_metadata-0" / "quorum-state").exists()
