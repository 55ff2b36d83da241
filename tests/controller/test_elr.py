"""Eligible leader replicas (KIP-966): plan_change's rules, and the controller paths using them.

ELR is on only with the feature eligible.leader.replicas.version >= 1; each test says which.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from strom.coordinator.controller.election import Election, merge, plan_change
from strom.coordinator.controller.state_machine import Controller, check_features
from strom.coordinator.metadata.image import ELR_VERSION, MetadataImage, PartitionImage
from strom.coordinator.metadata.kraft_checkpoint import (
    decode_bootstrap,
    encode_bootstrap,
    image_records,
)
from strom.coordinator.metadata.metadata_records import decode_record, encode_record, write_version
from strom.storage.meta_properties import format_directories, read_bootstrap
from strom.wire.formats.metadata.clear_elr_record import ClearElrRecord
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.controller.helpers import commit, make_controller
from tests.controller.test_brokers import SESSION_MS, Cluster

TOPIC = uuid.UUID(int=7)
RECOVERING = 1


def _partition(
    isr: tuple[int, ...],
    leader: int,
    *,
    elr: tuple[int, ...] = (),
    last_known_elr: tuple[int, ...] = (),
    replicas: tuple[int, ...] = (1, 2, 3),
) -> PartitionImage:
    return PartitionImage(0, replicas, isr, leader, 5, 9, elr=elr, last_known_elr=last_known_elr)


def _everyone(_broker: int) -> bool:
    return True


def _after(
    partition: PartitionImage, acceptable: object = _everyone, **targets: object
) -> PartitionImage:
    record = plan_change(TOPIC, partition, acceptable, **targets)  # type: ignore[arg-type]
    assert record is not None
    return merge(partition, record)


# --- plan_change -------------------------------------------------------------------------------


def test_a_shrink_below_min_isr_moves_the_leavers_into_the_elr() -> None:
    p = _partition((1, 2, 3), 1)
    at_min = _after(p, isr=[1, 2], min_isr=2)
    assert (at_min.isr, at_min.elr) == ((1, 2), ())  # still at min ISR: no ELR
    below = _after(at_min, isr=[1], min_isr=2)
    assert (below.leader, below.isr, below.elr, below.last_known_elr) == (1, (1,), (2,), ())
    empty = _after(below, lambda b: b == 3, isr=[], min_isr=2)  # 1 and 2 are down
    assert (empty.leader, empty.isr, empty.elr) == (-1, (), (1, 2))
    assert empty.last_known_elr == (1,)  # the leader the partition had when its ISR emptied


def test_without_elr_the_last_member_stays_in_the_isr() -> None:
    p = _partition((1,), 1)
    after = _after(p, lambda b: b != 1, isr=[])
    assert (after.leader, after.isr, after.elr, after.last_known_elr) == (-1, (1,), (), ())


def test_an_isr_back_at_min_isr_clears_the_elr() -> None:
    p = _partition((1,), 1, elr=(2, 3))
    after = _after(p, isr=[1, 2], min_isr=2)
    assert (after.isr, after.elr) == ((1, 2), ())


def test_an_elr_member_leads_once_the_isr_is_empty() -> None:
    p = _partition((), -1, elr=(2, 3), last_known_elr=(1,))
    record = plan_change(TOPIC, p, lambda b: b == 3, min_isr=2)
    assert record is not None
    after = merge(p, record)
    assert (after.leader, after.isr, after.elr, after.last_known_elr) == (3, (3,), (2,), ())
    assert after.leader_recovery_state == 0  # a clean election: nothing committed is lost
    assert plan_change(TOPIC, p, lambda b: b == 1, min_isr=2) is None  # only ELR members


def test_the_last_known_leader_leads_when_isr_and_elr_are_empty() -> None:
    p = _partition((), -1, last_known_elr=(1,))
    assert plan_change(TOPIC, p, lambda b: b == 2, min_isr=2) is None
    after = _after(p, lambda b: b in (1, 2), min_isr=2)
    assert (after.leader, after.isr, after.elr, after.last_known_elr) == (1, (1,), (), ())
    assert after.leader_recovery_state == RECOVERING  # as an unclean election


def test_an_unclean_election_empties_the_elr() -> None:
    p = _partition((), -1, elr=(2,))
    after = _after(p, lambda b: b == 3, election=Election.UNCLEAN, min_isr=2)
    assert (after.leader, after.isr, after.elr) == (3, (3,), ())
    assert after.leader_recovery_state == RECOVERING


def test_an_unclean_shutdown_leaves_the_elr_and_the_isr() -> None:
    p = _partition((1,), 1, elr=(2, 3))
    after = _after(p, lambda b: b != 2, isr=[1], min_isr=2, unclean_shutdown=[2])
    assert (after.leader, after.isr, after.elr) == (1, (1,), (3,))


def test_disabled_elr_clears_what_a_partition_still_carries() -> None:
    p = _partition((1,), 1, elr=(2,), last_known_elr=(3,))
    after = _after(p)
    assert (after.elr, after.last_known_elr) == ((), ())


def test_a_removed_replica_leaves_the_elr() -> None:
    p = _partition((1,), 1, elr=(2, 3))
    after = _after(p, isr=[1], replicas=[1, 2], min_isr=2)
    assert after.elr == (2,)


# --- the controller ------------------------------------------------------------------------------


def _elr_cluster(min_isr: int = 2) -> Cluster:
    """Node 1 plus brokers 2, 3, 4 and topic "t" on 2, 3, 4 (2 leads), ELR enabled."""
    cluster = Cluster({"min.insync.replicas": str(min_isr)})
    cluster.controller.replay([FeatureLevelRecord(ELR_VERSION, 1)])
    cluster.offset += 1
    for broker_id in (2, 3, 4):
        cluster.join(broker_id)
    cluster.topic_on("t", 2, 3, 4)
    return cluster


def _state(cluster: Cluster) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    p = cluster.partition("t")
    return p.leader, p.isr, p.elr, p.last_known_elr


def _epoch(cluster: Cluster, broker_id: int) -> int:
    registration = cluster.controller.image.broker(broker_id)
    assert registration is not None
    return registration.epoch


def _fence(cluster: Cluster, broker_id: int) -> None:
    assert cluster.heartbeat(broker_id, _epoch(cluster, broker_id), want_fence=True).is_fenced


def test_fencing_populates_the_elr_and_a_clean_restart_leads_from_it() -> None:
    cluster = _elr_cluster()
    _fence(cluster, 4)
    assert _state(cluster) == (2, (2, 3), (), ())
    _fence(cluster, 3)
    assert _state(cluster) == (2, (2,), (3,), ())
    _fence(cluster, 2)
    assert _state(cluster) == (-1, (), (2, 3), (2,))
    # broker 3 restarts cleanly: its marker names the epoch of its previous incarnation
    cluster.now = SESSION_MS + 1
    previous = _epoch(cluster, 3)
    epoch = cluster.register(3, incarnation=33, previous_broker_epoch=previous).broker_epoch
    assert _state(cluster) == (-1, (), (2, 3), (2,))
    assert not cluster.heartbeat(3, epoch).is_fenced
    assert _state(cluster) == (3, (3,), (2,), ())
    assert cluster.partition("t").leader_recovery_state == 0


def test_an_unclean_restart_leaves_the_elr() -> None:
    cluster = _elr_cluster()
    _fence(cluster, 4)
    _fence(cluster, 3)
    _fence(cluster, 2)
    cluster.now = SESSION_MS + 1
    epoch = cluster.register(3, incarnation=33).broker_epoch  # no marker: previous epoch -1
    assert _state(cluster) == (-1, (), (2,), (2,))
    assert not cluster.heartbeat(3, epoch).is_fenced
    assert _state(cluster) == (-1, (), (2,), (2,))  # 3 may lose acknowledged records
    epoch2 = cluster.register(2, incarnation=22).broker_epoch
    assert _state(cluster) == (-1, (), (), (2,))
    assert not cluster.heartbeat(2, epoch2).is_fenced
    # ISR and ELR empty: the last known leader leads, as before KIP-966 the last ISR member
    assert _state(cluster) == (2, (2,), (), ())
    assert cluster.partition("t").leader_recovery_state == RECOVERING


def test_an_unclean_restart_of_an_isr_member_takes_it_out_of_the_isr() -> None:
    cluster = _elr_cluster()
    cluster.now = SESSION_MS + 1  # lease run out, no fencing pass yet
    cluster.register(3, incarnation=33)  # 3 was unfenced: a kill -9 and restart
    assert _state(cluster) == (2, (2, 4), (), ())


def test_min_isr_above_the_replication_factor_is_capped() -> None:
    cluster = _elr_cluster(min_isr=5)  # effective 3: an ISR of 3 has no ELR
    assert _state(cluster) == (2, (2, 3, 4), (), ())
    _fence(cluster, 4)
    assert _state(cluster) == (2, (2, 3), (4,), ())


def test_controlled_shutdown_populates_the_elr() -> None:
    cluster = _elr_cluster(min_isr=3)
    cluster.heartbeat(2, _epoch(cluster, 2), want_shut_down=True)
    assert _state(cluster) == (3, (3, 4), (2,), ())


def test_without_the_feature_fencing_keeps_the_last_member() -> None:
    cluster = Cluster({"min.insync.replicas": "2"})
    for broker_id in (2, 3):
        cluster.join(broker_id)
    cluster.topic_on("t", 2, 3)
    _fence(cluster, 3)
    _fence(cluster, 2)
    assert _state(cluster) == (-1, (2,), (), ())


def _alter(controller: Controller, isr: list[int]) -> AlterPartitionResponse:
    p = controller.image.partition("t", 0)
    registration = controller.image.broker(2)
    assert p is not None
    assert registration is not None
    Data = AlterPartitionRequest
    request = Data(
        broker_id=2,
        broker_epoch=registration.epoch,
        topics=[
            Data.TopicData(
                topic_id=controller.image.topic("t").topic_id,  # type: ignore[union-attr]
                partitions=[
                    Data.PartitionData(
                        partition_index=0,
                        leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        new_isr_with_epochs=[Data.BrokerState(b, -1) for b in isr],
                    )
                ],
            )
        ],
    )
    return commit(controller, controller.alter_partition(request, 3))


def test_alter_partition_shrink_and_expand() -> None:
    cluster = _elr_cluster()
    assert _alter(cluster.controller, [2]).topics[0].partitions[0].error_code == 0
    assert _state(cluster) == (2, (2,), (3, 4), ())
    assert _alter(cluster.controller, [2, 4]).topics[0].partitions[0].error_code == 0
    assert _state(cluster) == (2, (2, 4), (), ())


def test_a_min_isr_change_clears_the_elr() -> None:
    cluster = _elr_cluster()
    _alter(cluster.controller, [2])
    assert _state(cluster)[2] == (3, 4)
    Request = IncrementalAlterConfigsRequest
    config = Request.AlterableConfig("min.insync.replicas", 0, "1")
    request = Request(resources=[Request.AlterConfigsResource(2, "t", [config])])
    result = cluster.controller.incremental_alter_configs(request, 1)
    assert [r for r in result.records if isinstance(r, ClearElrRecord)] == [ClearElrRecord("t")]
    commit(cluster.controller, result)
    assert _state(cluster) == (2, (2,), (), ())


# --- records, snapshots, features --------------------------------------------------------------


def test_records_carry_elr_at_version_2_only_when_set() -> None:
    change = PartitionChangeRecord(partition_id=0, topic_id=TOPIC, isr=[1])
    assert write_version(change) == 0
    change.eligible_leader_replicas = [2]
    change.last_known_elr = []
    assert write_version(change) == 2
    decoded, version = decode_record(encode_record(change))
    assert version == 2
    assert isinstance(decoded, PartitionChangeRecord)
    assert (decoded.eligible_leader_replicas, decoded.last_known_elr) == ([2], [])


def test_snapshot_round_trip_keeps_the_elr() -> None:
    image = MetadataImage.EMPTY.apply_all(
        [
            FeatureLevelRecord("metadata.version", 25),
            FeatureLevelRecord(ELR_VERSION, 1),
            TopicRecord("t", TOPIC),
            PartitionRecord(
                partition_id=0,
                topic_id=TOPIC,
                replicas=[1, 2, 3],
                isr=[],
                leader=-1,
                eligible_leader_replicas=[2, 3],
                last_known_elr=[1],
            ),
        ]
    )
    encoded = [decode_record(encode_record(r))[0] for r in image_records(image)]
    again = MetadataImage.EMPTY.apply_all(encoded)
    assert again.partition("t", 0) == image.partition("t", 0)
    p = again.partition("t", 0)
    assert p is not None
    assert (p.elr, p.last_known_elr) == ((2, 3), (1,))
    assert again.elr_enabled
    cleared = again.apply(ClearElrRecord(""))
    q = cleared.partition("t", 0)
    assert q is not None
    assert (q.elr, q.last_known_elr, q.partition_epoch) == ((), (), p.partition_epoch + 1)


def test_feature_levels_and_their_dependencies() -> None:
    check_features(25, {ELR_VERSION: 1})
    check_features(7, {ELR_VERSION: 0})
    with pytest.raises(ValueError, match=r"requires metadata\.version 24"):
        check_features(23, {ELR_VERSION: 1})
    with pytest.raises(ValueError, match="level 2"):
        check_features(25, {ELR_VERSION: 2})
    with pytest.raises(ValueError, match="unsupported feature"):
        check_features(25, {"share.version": 1})
    controller = make_controller()
    assert not controller.image.elr_enabled  # off by default (Kafka's default for 4.0-IV3)
    registration = controller.local_registration([], uuid.UUID(int=5))
    assert (ELR_VERSION, 0, 1) in [
        (f.name, f.min_supported_version, f.max_supported_version) for f in registration.features
    ]


def test_format_writes_the_feature_into_the_bootstrap_checkpoint(tmp_path: Path) -> None:
    format_directories(
        [tmp_path / "data"],
        tmp_path / "meta",
        cluster_id="MkU3OEVBNTcwNTJENDM2Qg",
        node_id=1,
        new_uuid=uuid.uuid4,
        ignore_formatted=False,
        bootstrap=encode_bootstrap({"metadata.version": 25, ELR_VERSION: 1}, 0),
        voters=frozenset({1}),
    )
    data = read_bootstrap(tmp_path / "meta")
    assert data is not None
    levels = decode_bootstrap(data, "bootstrap.checkpoint").levels
    assert levels == {"metadata.version": 25, ELR_VERSION: 1}
