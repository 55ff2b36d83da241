"""Brokers in the pure controller: registration, heartbeats, leases, fencing, controlled shutdown.

Time is an input (`now_ms`), so every lease test runs on a fake clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from typing import TypeVar

import pytest

from strom.config import BrokerConfig
from strom.config.planted import planting
from strom.coordinator.controller import Controller, ControllerResult
from strom.coordinator.controller.brokers import leads_partitions
from strom.coordinator.controller.result import PLAN_SLICE
from strom.coordinator.metadata.image import PartitionImage
from strom.coordinator.metadata.replica_index import BUILD_SLICE, ReplicaIndex, replica_index
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from strom.wire.messages.alter_partition import AlterPartitionRequest
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from strom.wire.messages.create_topics import CreateTopicsRequest
from tests.controller.helpers import commit, create, make_controller

R = TypeVar("R")
SESSION_MS = 9000
"""broker.session.timeout.ms's default."""


class Cluster:
    """A controller (node 1, registered) and a log offset that grows with every commit."""

    def __init__(self, props: dict[str, str] | None = None) -> None:
        self.controller: Controller = make_controller(props)
        self.offset = 10  # the next log offset: a broker's epoch is its record's offset
        self.now = 0
        self.controller.leases.sessions[1].last_contact_ms = 10**12  # node 1 stays live

    def register(
        self, broker_id: int, incarnation: int | None = None, **fields: object
    ) -> BrokerRegistrationResponse:
        request = BrokerRegistrationRequest(
            broker_id=broker_id,
            cluster_id=self.controller.cluster_id,
            incarnation_id=uuid.UUID(int=incarnation or broker_id),
            listeners=[BrokerRegistrationRequest.Listener("PLAINTEXT", f"h{broker_id}", 9092, 0)],
            features=[BrokerRegistrationRequest.Feature("metadata.version", 7, 25)],
        )
        for name, value in fields.items():
            setattr(request, name, value)
        result = self.controller.broker_registration(
            request, broker_epoch=self.offset, now_ms=self.now
        )
        return self._commit(result)

    def heartbeat(
        self,
        broker_id: int,
        epoch: int,
        offset: int | None = None,
        *,
        want_fence: bool = False,
        want_shut_down: bool = False,
    ) -> BrokerHeartbeatResponse:
        request = BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=epoch,
            current_metadata_offset=self.offset - 1 if offset is None else offset,
            want_fence=want_fence,
            want_shut_down=want_shut_down,
        )
        result = self.controller.broker_heartbeat(request, next_offset=self.offset, now_ms=self.now)
        return self._commit(result)

    def join(self, broker_id: int) -> int:
        """Register and unfence a broker; its epoch."""
        epoch = self.register(broker_id).broker_epoch
        assert not self.heartbeat(broker_id, epoch).is_fenced
        return epoch

    def fence_stale(self) -> int | None:
        return self._commit(self.controller.fence_stale_broker(self.now))

    def _commit(self, result: ControllerResult[R]) -> R:
        response = commit(self.controller, result)
        self.offset += len(result.records)
        return response

    def partition(self, topic: str, index: int = 0) -> PartitionImage:
        found = self.controller.image.partition(topic, index)
        assert found is not None
        return found

    def topic_on(self, name: str, *replicas: int) -> None:
        """A one-partition topic with exactly these replicas (the first leads)."""
        assignment = CreateTopicsRequest.CreatableReplicaAssignment
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=-1, replication_factor=-1,
            assignments=[assignment(partition_index=0, broker_ids=list(replicas))],
        )  # fmt: skip
        result = create(self.controller, topic)
        assert result.topics[0].error_code == ErrorCode.NONE, result.topics[0].error_message


# --- registration -----------------------------------------------------------------------------


def test_registration_is_fenced_until_a_caught_up_heartbeat() -> None:
    cluster = Cluster()
    response = cluster.register(2)
    assert (response.error_code, response.broker_epoch) == (ErrorCode.NONE, 10)
    broker = cluster.controller.image.broker(2)
    assert broker is not None
    assert (broker.epoch, broker.fenced, broker.incarnation_id) == (10, True, uuid.UUID(int=2))
    behind = cluster.heartbeat(2, 10, offset=9)
    assert (behind.is_caught_up, behind.is_fenced, behind.should_shut_down) == (False, True, False)
    caught_up = cluster.heartbeat(2, 10, offset=10)
    assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
    broker = cluster.controller.image.broker(2)
    assert broker is not None
    assert not broker.fenced


def test_want_fence_keeps_a_caught_up_broker_fenced() -> None:
    cluster = Cluster()
    epoch = cluster.register(2).broker_epoch
    assert cluster.heartbeat(2, epoch, want_fence=True).is_fenced
    assert not cluster.heartbeat(2, epoch).is_fenced
    assert cluster.heartbeat(2, epoch, want_fence=True).is_fenced  # UNFENCED -> FENCED


def test_wrong_cluster_id_is_inconsistent() -> None:
    response = Cluster().register(2, cluster_id="another-cluster")
    assert response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert response.broker_epoch == -1


def test_a_broker_that_cannot_run_the_metadata_version_is_refused() -> None:
    too_old = [BrokerRegistrationRequest.Feature("metadata.version", 1, 7)]
    assert Cluster().register(2, features=too_old).error_code == ErrorCode.UNSUPPORTED_VERSION
    # no metadata.version range at all: assumed to support only level 1, as Kafka assumes
    assert Cluster().register(2, features=[]).error_code == ErrorCode.UNSUPPORTED_VERSION


def test_zk_migrating_broker_is_refused() -> None:
    response = Cluster().register(2, is_migrating_zk_broker=True)
    assert response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_another_incarnation_waits_for_the_session_to_expire() -> None:
    cluster = Cluster()
    cluster.join(2)
    cluster.now = SESSION_MS  # the lease runs until last contact + session timeout, inclusive
    duplicate = cluster.register(2, incarnation=99)
    assert duplicate.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    again = cluster.register(2)  # the same incarnation may register again (a retry)
    assert again.error_code == ErrorCode.NONE
    cluster.now = 2 * SESSION_MS + 1
    replaced = cluster.register(2, incarnation=99)
    assert replaced.error_code == ErrorCode.NONE
    broker = cluster.controller.image.broker(2)
    assert broker is not None
    assert (broker.incarnation_id, broker.epoch) == (uuid.UUID(int=99), replaced.broker_epoch)


HEARTBEAT_MS = 2000
"""broker.heartbeat.interval.ms's default: an incarnation silent for two of them stopped."""


def test_a_second_incarnation_is_refused_while_the_first_still_heartbeats() -> None:
    """The same directory ids do not prove the first process gone: the directory lock is local
    to one host, and a copy of the directory on another host names the same ids. While the
    first incarnation heartbeats, the second is DUPLICATE_BROKER_REGISTRATION, as in Kafka."""
    cluster = Cluster()
    disk = uuid.UUID(int=0xD15C)
    old = cluster.register(2, log_dirs=[disk]).broker_epoch
    assert not cluster.heartbeat(2, old).is_fenced
    cluster.topic_on("pair", 2, 1)
    for now in (1000, 2 * HEARTBEAT_MS, 3 * HEARTBEAT_MS):
        cluster.now = now
        twin = cluster.register(2, incarnation=99, log_dirs=[disk])
        assert twin.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        assert not cluster.heartbeat(2, old).is_fenced  # the first one goes on
    assert cluster.partition("pair").leader == 2


def test_a_restart_replaces_an_incarnation_that_stopped_heartbeating_at_once() -> None:
    """A kill -9 (or a power cut) and restart: the new process names the old one's directories
    and the old one has missed its heartbeats, so it is fenced (out of the ISR, leadership
    moved) without waiting for its lease, and the new one registers after those records."""
    cluster = Cluster()
    disk = uuid.UUID(int=0xD15C)
    old = cluster.register(2, log_dirs=[disk]).broker_epoch
    assert not cluster.heartbeat(2, old).is_fenced
    cluster.topic_on("pair", 2, 1)
    cluster.now = 2 * HEARTBEAT_MS + 1  # silent for two intervals, well within the lease
    other_disk = cluster.register(2, incarnation=98, log_dirs=[uuid.UUID(int=7)])
    assert other_disk.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION  # maybe alive
    before = cluster.offset
    restarted = cluster.register(2, incarnation=99, log_dirs=[disk])
    assert restarted.error_code == ErrorCode.NONE
    pair = cluster.partition("pair")
    assert (pair.leader, pair.isr) == (1, (1,))
    assert restarted.broker_epoch == cluster.offset - 1 > before  # its record's own offset
    broker = cluster.controller.image.broker(2)
    assert broker is not None
    assert (broker.incarnation_id, broker.epoch, broker.fenced) == (
        uuid.UUID(int=99),
        restarted.broker_epoch,
        True,
    )
    assert cluster.heartbeat(2, old).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert not cluster.heartbeat(2, restarted.broker_epoch).is_fenced
    assert cluster.partition("pair").isr == (1,)  # it rejoins by catching up, not by restarting


def test_a_restart_never_leads_in_its_previous_incarnations_leader_epoch() -> None:
    """Where the restarted broker is the only ISR member it goes on leading, but in a new
    leader epoch: its log may have lost an unsynced tail that followers outside the ISR still
    hold, and appends in the old epoch would pass their divergence check."""
    cluster = Cluster()
    disk = uuid.UUID(int=0xD15C)
    old = cluster.register(2, log_dirs=[disk]).broker_epoch
    assert not cluster.heartbeat(2, old).is_fenced
    cluster.topic_on("alone", 2, 1)
    cluster.topic_on("pair", 2, 1)
    cluster.topic_on("single", 2)
    alone = cluster.partition("alone")
    shrink = AlterPartitionRequest(
        broker_id=2,
        broker_epoch=old,
        topics=[
            AlterPartitionRequest.TopicData(
                cluster.controller.image.topics_by_name["alone"].topic_id,
                [
                    AlterPartitionRequest.PartitionData(
                        partition_index=0,
                        leader_epoch=alone.leader_epoch,
                        new_isr_with_epochs=[AlterPartitionRequest.BrokerState(2, old)],
                        partition_epoch=alone.partition_epoch,
                    )
                ],
            )
        ],
    )
    cluster._commit(cluster.controller.alter_partition(shrink, 3))
    assert cluster.partition("alone").isr == (2,)  # broker 1 fell behind
    names = ("alone", "pair", "single")
    before = {name: cluster.partition(name).leader_epoch for name in names}
    cluster.now = 2 * HEARTBEAT_MS + 1
    restarted = cluster.register(2, incarnation=99, log_dirs=[disk])
    assert restarted.error_code == ErrorCode.NONE
    alone = cluster.partition("alone")
    assert (alone.leader, alone.isr) == (-1, (2,))  # offline until the new one is unfenced
    assert alone.leader_epoch > before["alone"]
    assert not cluster.heartbeat(2, restarted.broker_epoch).is_fenced
    alone = cluster.partition("alone")
    assert (alone.leader, alone.isr) == (2, (2,))
    assert alone.leader_epoch > before["alone"] + 1
    assert cluster.partition("pair").leader_epoch > before["pair"]
    # a single replica has no follower to diverge from: a restarted node rewrites none of them
    assert cluster.partition("single").leader_epoch == before["single"]


def test_a_fenced_incarnation_is_replaced_at_once() -> None:
    """Kafka: a fenced broker holds no valid session (whatever its directories)."""
    cluster = Cluster()
    old = cluster.join(2)
    assert cluster.heartbeat(2, old, want_fence=True).is_fenced
    assert cluster.register(2, incarnation=99).error_code == ErrorCode.NONE


def test_a_new_incarnation_after_the_lease_ran_out_fences_the_old_one_first() -> None:
    cluster = Cluster()
    cluster.join(2)
    cluster.topic_on("pair", 2, 1)
    cluster.now = SESSION_MS + 1  # expired, but no fencing pass has run yet
    assert cluster.register(2, incarnation=99).error_code == ErrorCode.NONE
    pair = cluster.partition("pair")
    assert (pair.leader, pair.isr) == (1, (1,))


# --- heartbeats and epochs ---------------------------------------------------------------------


@pytest.mark.parametrize(("broker_id", "epoch"), [(2, 9), (2, 11), (5, 10)])
def test_stale_or_unknown_epochs_are_refused(broker_id: int, epoch: int) -> None:
    cluster = Cluster()
    cluster.join(2)  # epoch 10
    response = cluster.heartbeat(broker_id, epoch)
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_a_new_registration_makes_the_old_epoch_stale() -> None:
    cluster = Cluster()
    old = cluster.join(2)
    new = cluster.register(2).broker_epoch
    assert cluster.heartbeat(2, old).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert cluster.heartbeat(2, new).error_code == ErrorCode.NONE


# --- leases and fencing -----------------------------------------------------------------------


def test_an_expired_lease_fences_the_broker_and_its_partitions_go_offline() -> None:
    cluster = Cluster()
    epoch = cluster.join(2)
    cluster.topic_on("solo", 2)
    assert cluster.partition("solo").leader == 2
    cluster.now = SESSION_MS
    assert cluster.fence_stale() is None  # heartbeat at 0: valid through 9000
    cluster.now = SESSION_MS - 1
    cluster.heartbeat(2, epoch)  # renews until 17999
    cluster.now = 2 * SESSION_MS - 1
    assert cluster.fence_stale() is None
    assert cluster.controller.next_lease_expiry() == 2 * SESSION_MS - 1
    cluster.now = 2 * SESSION_MS
    assert cluster.fence_stale() == 2
    broker = cluster.controller.image.broker(2)
    assert broker is not None
    assert broker.fenced
    solo = cluster.partition("solo")
    assert (solo.leader, solo.isr, solo.leader_epoch) == (-1, (2,), 1)  # offline, never "led"
    assert cluster.fence_stale() is None  # one broker, fenced once


def test_a_heartbeat_renews_the_lease_on_arrival_before_its_turn_comes() -> None:
    """A controller backlogged with commands must not fence a broker whose heartbeat waits in
    the queue (Kafka's trackBrokerHeartbeat): the lease counts from the arrival."""
    cluster = Cluster()
    epoch = cluster.join(2)
    cluster.now = SESSION_MS - 1
    cluster.controller.touch_lease(2, epoch, cluster.now)  # arrived; not yet run
    cluster.controller.touch_lease(2, epoch + 1, 10 * SESSION_MS)  # another epoch: ignored
    cluster.controller.touch_lease(3, 0, 10 * SESSION_MS)  # not registered: ignored
    cluster.now = 2 * SESSION_MS - 1
    assert cluster.fence_stale() is None
    cluster.now = 2 * SESSION_MS
    assert cluster.fence_stale() == 2


def test_fencing_a_leader_moves_leadership_to_the_in_sync_replica() -> None:
    cluster = Cluster()
    cluster.join(2)
    cluster.topic_on("pair", 2, 1)
    cluster.now = SESSION_MS + 1
    assert cluster.fence_stale() == 2
    pair = cluster.partition("pair")
    assert (pair.leader, pair.isr, pair.replicas) == (1, (1,), (2, 1))


def test_unfencing_elects_the_broker_for_its_offline_partitions() -> None:
    cluster = Cluster()
    cluster.join(2)
    cluster.topic_on("solo", 2)
    cluster.now = SESSION_MS + 1
    assert cluster.fence_stale() == 2
    assert cluster.partition("solo").leader == -1
    epoch = cluster.register(2).broker_epoch  # a restart: new registration, fenced
    assert cluster.partition("solo").leader == -1
    assert not cluster.heartbeat(2, epoch).is_fenced
    solo = cluster.partition("solo")
    assert (solo.leader, solo.isr) == (2, (2,))


def _index_matches_a_rebuild(cluster: Cluster) -> None:
    image = cluster.controller.image
    carried = image.replica_index_cache
    assert isinstance(carried, ReplicaIndex)  # carried over, not rebuilt on demand
    rebuilt = ReplicaIndex.build(image)
    assert {b: t for b, t in carried.by_broker.items() if t} == rebuilt.by_broker
    assert carried.leaderless == rebuilt.leaderless


def test_the_replica_index_follows_every_change_without_a_rescan() -> None:
    """Fencing, unfencing and shutting down look only at the partitions the broker holds or
    that have no leader (the index the controller carries from image to image); it must
    say what a fresh scan of the image says after every command."""
    cluster = Cluster()
    replica_index(cluster.controller.image)  # built once; carried from here on
    epochs = {b: cluster.join(b) for b in (2, 3)}
    cluster.topic_on("pair", 2, 3)
    cluster.topic_on("solo", 2)
    cluster.topic_on("other", 3, 1)
    _index_matches_a_rebuild(cluster)
    held = [(t.name, p.partition_id) for t, p in replica_index(cluster.controller.image).held_by(
        cluster.controller.image, 2)]  # fmt: skip
    assert held == [("pair", 0), ("solo", 0)]  # in the image's order
    cluster.now = SESSION_MS + 1
    cluster.controller.leases.sessions[3].last_contact_ms = cluster.now
    assert cluster.fence_stale() == 2
    _index_matches_a_rebuild(cluster)
    image = cluster.controller.image
    assert [t.name for t, _ in replica_index(image).without_leader(image)] == ["solo"]
    epochs[2] = cluster.register(2).broker_epoch
    assert not cluster.heartbeat(2, epochs[2]).is_fenced
    _index_matches_a_rebuild(cluster)
    image = cluster.controller.image
    assert list(replica_index(image).without_leader(image)) == []
    cluster.heartbeat(3, epochs[3], want_shut_down=True)
    _index_matches_a_rebuild(cluster)
    assert not leads_partitions(cluster.controller.image, 3)


def test_activation_gives_a_fresh_lease_except_to_the_own_broker() -> None:
    cluster = Cluster()
    cluster.join(2)
    cluster.controller.activate(50_000, except_broker=1)
    assert set(cluster.controller.leases.sessions) == {2}
    cluster.now = 50_000 + SESSION_MS
    assert cluster.fence_stale() is None
    cluster.now += 1
    assert cluster.fence_stale() == 2
    # the own broker has no lease to wait out: a new incarnation registers at once
    assert cluster.register(1, incarnation=77).error_code == ErrorCode.NONE


# --- controlled shutdown ----------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_then_allows_shutdown() -> None:
    cluster = Cluster()
    epoch = cluster.join(2)
    cluster.topic_on("solo", 2)
    first = cluster.heartbeat(2, epoch, want_shut_down=True)
    assert (first.is_fenced, first.should_shut_down) == (False, False)
    broker = cluster.controller.image.broker(2)
    assert broker is not None
    assert broker.in_controlled_shutdown
    assert cluster.partition("solo").leader == -1  # no other replica: offline
    node = cluster.controller.image.broker(1)
    assert node is not None
    cluster.heartbeat(1, node.epoch)  # the only active broker has seen the change
    second = cluster.heartbeat(2, epoch, want_shut_down=True)
    assert (second.is_fenced, second.should_shut_down) == (True, True)
    broker = cluster.controller.image.broker(2)
    assert broker is not None
    assert broker.fenced


def test_controlled_shutdown_waits_for_active_brokers_to_catch_up() -> None:
    cluster = Cluster()
    epoch = cluster.join(2)
    cluster.topic_on("solo", 2)
    node = cluster.controller.image.broker(1)
    assert node is not None
    cluster.heartbeat(1, node.epoch, offset=0)  # node 1 is behind
    assert not cluster.heartbeat(2, epoch, want_shut_down=True).should_shut_down
    assert not cluster.heartbeat(2, epoch, want_shut_down=True).should_shut_down
    cluster.heartbeat(1, node.epoch)  # caught up
    assert cluster.heartbeat(2, epoch, want_shut_down=True).should_shut_down


def test_a_broker_leading_nothing_shuts_down_at_once() -> None:
    cluster = Cluster()
    epoch = cluster.join(2)
    offset = cluster.offset
    response = cluster.heartbeat(2, epoch, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (True, True)
    assert cluster.offset == offset + 1  # just the fence record
    fenced = cluster.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker_id=2, broker_epoch=epoch, want_shut_down=True),
        next_offset=cluster.offset,
        now_ms=0,
    )
    assert fenced.response.should_shut_down
    assert fenced.records == []  # a fenced broker shutting down writes nothing


def test_fence_record_is_a_registration_change() -> None:
    cluster = Cluster()
    epoch = cluster.join(2)
    result = cluster.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker_id=2, broker_epoch=epoch, want_fence=True),
        next_offset=cluster.offset,
        now_ms=0,
    )
    assert result.records == [BrokerRegistrationChangeRecord(2, epoch, fenced=1)]


def test_session_timeout_comes_from_the_config() -> None:
    controller = Controller(
        BrokerConfig.from_properties({"broker.session.timeout.ms": "500"}),
        new_uuid=lambda: uuid.UUID(int=1),
    )
    assert controller.leases.session_timeout_ms == 500


@pytest.mark.parametrize(
    "test",
    [
        test_a_second_incarnation_is_refused_while_the_first_still_heartbeats,
        test_a_restart_never_leads_in_its_previous_incarnations_leader_epoch,
    ],
)
def test_the_planted_restart_bug_is_caught(test: Callable[[], None]) -> None:
    """strom.config.planted's restart-keeps-leader-epoch is what these tests catch."""
    with planting("restart-keeps-leader-epoch"), pytest.raises(AssertionError):
        test()


def _run(steps: Generator[None, None, R]) -> tuple[R, int]:
    """Run planning steps to the end: (result, how often they yielded)."""
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: R = done.value
            return result, yields
        yields += 1


def test_fencing_and_unfencing_a_broker_of_many_partitions_are_planned_in_steps() -> None:
    """A broker holding thousands of partitions is fenced in steps (one yield every
    PLAN_SLICE partitions, the replica index built in steps first if the image has none, as
    after a snapshot's load): the same records as planned at once; and unfenced again."""
    cluster = Cluster()
    epoch = cluster.join(2)
    many = 3 * PLAN_SLICE
    request = CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name="t", num_partitions=many,
                                                   replication_factor=2)]
    )  # fmt: skip
    cluster.controller.replay(cluster.controller.create_topics(request, 7).records)
    cluster.offset += many + 1
    controller = cluster.controller
    object.__setattr__(controller.image, "replica_index_cache", None)  # as a loaded snapshot
    cluster.now = SESSION_MS + 1
    stepped, yields = _run(controller.fence_stale_broker_steps(cluster.now))
    assert yields >= many // BUILD_SLICE + many // PLAN_SLICE - 1
    at_once = controller.fence_stale_broker(cluster.now)
    assert (stepped.response, stepped.records) == (at_once.response, at_once.records) == (
        2, stepped.records
    )
    assert len(stepped.records) == many + 1  # every partition it held, then the fence
    cluster._commit(at_once)
    epoch = cluster.register(2).broker_epoch
    beat = BrokerHeartbeatRequest(
        broker_id=2, broker_epoch=epoch, current_metadata_offset=cluster.offset
    )
    unfenced, _ = _run(
        controller.broker_heartbeat_steps(beat, next_offset=cluster.offset, now_ms=cluster.now)
    )
    assert not unfenced.response.is_fenced
