"""MetadataImage replay: every modelled record type, copy-on-write, and the change sets."""

from __future__ import annotations

import uuid

import pytest

from strom.coordinator.metadata.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    Provenance,
)
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.wire.formats.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from strom.wire.formats.metadata.config_record import ConfigRecord
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
from strom.wire.formats.metadata.fence_broker_record import FenceBrokerRecord
from strom.wire.formats.metadata.no_op_record import NoOpRecord
from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.producer_ids_record import ProducerIdsRecord
from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord
from strom.wire.formats.metadata.remove_topic_record import RemoveTopicRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.formats.metadata.unfence_broker_record import UnfenceBrokerRecord
from strom.wire.formats.metadata.unregister_broker_record import UnregisterBrokerRecord

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def _partition(topic_id: uuid.UUID, index: int, replicas: list[int]) -> PartitionRecord:
    return PartitionRecord(
        index, topic_id, replicas, replicas, leader=replicas[0], leader_epoch=0, partition_epoch=0
    )


def _two_topics() -> MetadataImage:
    return MetadataImage.EMPTY.apply_all(
        [
            TopicRecord("a", A),
            _partition(A, 0, [1]),
            _partition(A, 1, [1]),
            TopicRecord("b", B),
            _partition(B, 0, [1]),
            ConfigRecord(TOPIC_RESOURCE, "a", "retention.ms", "5"),
        ]
    )


def test_topics_and_lookups() -> None:
    image = _two_topics()
    assert image.topic_names() == ["a", "b"]
    a = image.topic("a")
    assert a is not None
    assert a.num_partitions == 2
    assert a.topic_id == A
    assert image.topic_by_id(A) is a
    assert image.partition("a", 1) == a.partition(1)
    assert image.partition("a", 5) is None
    assert image.partition("zz", 0) is None
    assert image.topic_config_overrides("a") == {"retention.ms": "5"}
    copy = image.topic_config_overrides("a")
    copy["x"] = "y"
    assert image.topic_config_overrides("a") == {"retention.ms": "5"}


def test_copy_on_write_shares_unchanged_parts() -> None:
    base = _two_topics()
    after = base.apply(_partition(B, 1, [1]))
    assert base.topic("b").num_partitions == 1  # type: ignore[union-attr]
    assert after.topic("b").num_partitions == 2  # type: ignore[union-attr]
    assert after.topic("a") is base.topic("a")  # untouched topic reused as is
    assert after.configs is base.configs
    assert after.brokers_by_id is base.brokers_by_id


def test_partition_change_bumps_epochs() -> None:
    image = _two_topics().apply(
        PartitionRecord(2, A, [1, 2], [1, 2], leader=1, leader_epoch=4, partition_epoch=7)
    )
    isr_only = image.apply(PartitionChangeRecord(2, A, isr=[1]))
    p = isr_only.partition("a", 2)
    assert p is not None
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1,), 1, 4, 8)
    new_leader = isr_only.apply(PartitionChangeRecord(2, A, leader=2, replicas=[2, 1]))
    p = new_leader.partition("a", 2)
    assert p is not None
    assert (p.replicas, p.leader, p.leader_epoch, p.partition_epoch) == ((2, 1), 2, 5, 9)
    no_leader = new_leader.apply(PartitionChangeRecord(2, A, leader=-1))
    assert no_leader.partition("a", 2).leader == -1  # type: ignore[union-attr]


def test_remove_topic_drops_partitions_and_configs() -> None:
    image = _two_topics().apply(RemoveTopicRecord(A))
    assert image.topic("a") is None
    assert image.topic_by_id(A) is None
    assert (TOPIC_RESOURCE, "a") not in image.configs
    assert image.topic_names() == ["b"]
    again = image.apply_all([TopicRecord("a", uuid.UUID(int=9))])
    assert again.topic_config_overrides("a") == {}


def test_delta_change_sets() -> None:
    base = _two_topics()
    delta = base.delta()
    for record in (
        TopicRecord("c", uuid.UUID(int=3)),
        _partition(uuid.UUID(int=3), 0, [1]),
        _partition(B, 1, [1]),
        RemoveTopicRecord(A),
        ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "1"),
        FeatureLevelRecord("group.version", 1),
    ):
        delta.replay(record)
    image = delta.apply()
    assert delta.base is base
    assert delta.created_topics == {uuid.UUID(int=3)}
    assert set(delta.deleted_topics) == {A}
    assert delta.deleted_topics[A].name == "a"
    assert delta.changed_partitions == {(uuid.UUID(int=3), 0), (B, 1)}
    assert delta.changed_configs == {(TOPIC_RESOURCE, "a"), (BROKER_RESOURCE, "")}
    assert delta.changed_features == {"group.version"}
    assert image.topic_names() == ["b", "c"]


def test_topic_created_and_deleted_in_one_delta_is_in_neither_set() -> None:
    delta = MetadataImage.EMPTY.delta()
    delta.replay(TopicRecord("x", A))
    delta.replay(_partition(A, 0, [1]))
    delta.replay(RemoveTopicRecord(A))
    image = delta.apply()
    assert (delta.created_topics, delta.deleted_topics, delta.changed_partitions) == (
        set(),
        {},
        set(),
    )
    assert image.topic_names() == []


@pytest.mark.parametrize(
    "records",
    [
        [TopicRecord("a", A), TopicRecord("a", B)],
        [TopicRecord("a", A), TopicRecord("b", A)],
        [_partition(A, 0, [1])],
        [TopicRecord("a", A), PartitionChangeRecord(0, A, leader=1)],
        [RemoveTopicRecord(A)],
        [ProducerIdsRecord(1, 1, 1000), ProducerIdsRecord(1, 1, 1000)],
        [FenceBrokerRecord(1, 1)],
        [UnregisterBrokerRecord(1, 1)],
    ],
)
def test_inconsistent_records_raise(records: list[object]) -> None:
    with pytest.raises(MetadataError):
        MetadataImage.EMPTY.apply_all(records)  # type: ignore[arg-type]


def test_configs_set_and_delete() -> None:
    image = MetadataImage.EMPTY.apply_all(
        [
            ConfigRecord(BROKER_RESOURCE, "", "a", "1"),
            ConfigRecord(BROKER_RESOURCE, "", "b", "2"),
            ConfigRecord(BROKER_RESOURCE, "3", "a", "9"),
        ]
    )
    assert image.broker_config_overrides() == {"a": "1", "b": "2"}
    assert image.broker_config_overrides(3) == {"a": "9", "b": "2"}
    assert dict(image.config_overrides(BROKER_RESOURCE, "3")) == {"a": "9"}
    image = image.apply_all(
        [
            ConfigRecord(BROKER_RESOURCE, "3", "a", None),
            ConfigRecord(BROKER_RESOURCE, "", "zz", None),
        ]
    )
    assert (BROKER_RESOURCE, "3") not in image.configs  # empty resources vanish
    assert image.broker_config_overrides(3) == {"a": "1", "b": "2"}


def test_brokers_fencing_and_features() -> None:
    endpoint = RegisterBrokerRecord.BrokerEndpoint("PLAINTEXT", "h", 9092, 0)
    image = MetadataImage.EMPTY.apply_all(
        [
            FeatureLevelRecord("metadata.version", 25),
            RegisterBrokerRecord(broker_id=2, broker_epoch=10, end_points=[endpoint], rack="r1"),
            RegisterBrokerRecord(broker_id=1, broker_epoch=11),
            UnfenceBrokerRecord(2, 10),
        ]
    )
    assert image.metadata_version == 25
    assert [b.broker_id for b in image.brokers()] == [1, 2]
    two = image.broker(2)
    assert two is not None
    assert two.active
    assert two.rack == "r1"
    assert two.endpoint("PLAINTEXT") is not None
    assert two.endpoint("SSL") is None
    assert image.broker(1).fenced  # type: ignore[union-attr]
    image = image.apply_all(
        [
            BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=10, in_controlled_shutdown=1),
            BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=11, fenced=-1),
            FeatureLevelRecord("metadata.version", 0),
            UnregisterBrokerRecord(2, 10),
        ]
    )
    assert image.broker(2) is None
    one = image.broker(1)
    assert one is not None
    assert one.active
    assert image.features == {}
    assert image.metadata_version == 0


def test_producer_ids_and_ignored_records() -> None:
    image = MetadataImage.EMPTY.apply_all(
        [ProducerIdsRecord(1, 5, 1000), NoOpRecord()], Provenance(7, 2, 99)
    )
    assert image.next_producer_id == 1000
    assert image.provenance == Provenance(7, 2, 99)
    assert image.apply(NoOpRecord()).provenance == Provenance(7, 2, 99)


def test_replay_table_names_metadata_record_classes() -> None:
    from strom.coordinator.metadata.delta import _HANDLERS
    from strom.wire.formats.metadata import FORMATS

    assert set(_HANDLERS) <= set(FORMATS)
