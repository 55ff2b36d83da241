"""Replica liveness: brokers' reports of replicas that cannot serve, and the leadership
clients are told (coordinator.controller.liveness)."""

from __future__ import annotations

import uuid

import pytest

from strom.config import BrokerConfig, Listener
from strom.coordinator.controller import Controller, ControllerError
from strom.coordinator.controller.liveness import OfflineReplicas, partition_leadership
from strom.coordinator.metadata.image import PartitionImage
from strom.wire.errors import ErrorCode
from tests.controller.helpers import register_local

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def _partition(leader: int, replicas: tuple[int, ...] = (1, 2, 3)) -> PartitionImage:
    return PartitionImage(0, replicas, replicas, leader, 5, 7)


def test_a_report_replaces_the_brokers_previous_one() -> None:
    state = OfflineReplicas().report(1, [(A, 0), (A, 1)]).report(2, [(A, 1)])
    assert (state.of(A, 0), state.of(A, 1)) == (frozenset({1}), frozenset({1, 2}))
    state = state.report(1, [(B, 0)])
    assert [set(state.of(A, 0)), set(state.of(A, 1)), set(state.of(B, 0))] == [set(), {2}, {1}]
    assert state.report(1, [(B, 0)]) is state  # unchanged: the same object
    assert not OfflineReplicas().report(1, [(A, 0)]).report(1, [])


def test_an_offline_leader_reads_no_leader() -> None:
    offline = OfflineReplicas().report(1, [(A, 0)])
    up = lambda _broker: True  # noqa: E731
    assert partition_leadership(A, _partition(1), offline, up) == (-1, [1])
    assert partition_leadership(A, _partition(2), offline, up) == (2, [1])
    assert partition_leadership(B, _partition(1), offline, up) == (1, [])  # another topic id
    fenced_3 = lambda broker: broker != 3  # noqa: E731
    assert partition_leadership(A, _partition(3), OfflineReplicas(), fenced_3) == (-1, [3])
    assert partition_leadership(A, _partition(-1), OfflineReplicas(), up) == (-1, [])


def test_the_controller_takes_reports_from_registered_brokers_only() -> None:
    controller = Controller(BrokerConfig(), new_uuid=lambda: uuid.UUID(int=9))
    controller.replay(controller.bootstrap())
    with pytest.raises(ControllerError):
        controller.heartbeat(1, 0, [(A, 0)])  # not registered yet
    register_local(controller, [Listener("PLAINTEXT", "h", 1)], broker_epoch=1)
    assert controller.heartbeat(1, 1, [(A, 0)])
    assert not controller.heartbeat(1, 1, [(A, 0)])
    assert controller.offline_replicas.of(A, 0) == {1}
    with pytest.raises(ControllerError) as info:
        controller.heartbeat(1, 2, [])
    assert info.value.error.code == ErrorCode.STALE_BROKER_EPOCH
