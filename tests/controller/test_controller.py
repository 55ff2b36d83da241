"""The state machine's cluster life cycle: bootstrap, registration, producer id blocks."""

from __future__ import annotations

import uuid

import pytest

from strom.config import BrokerConfig, Listener
from strom.coordinator.controller import (
    LATEST_METADATA_VERSION,
    PRODUCER_ID_BLOCK_SIZE,
    Controller,
    ControllerError,
)
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
from strom.wire.formats.metadata.producer_ids_record import ProducerIdsRecord
from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord
from strom.wire.messages.create_topics import CreateTopicsRequest
from tests.controller.helpers import commit, make_controller, uuid_source


def _fresh(props: dict[str, str] | None = None) -> Controller:
    return Controller(BrokerConfig.from_properties(props or {}), new_uuid=uuid_source())


def test_bootstrap_once() -> None:
    controller = _fresh()
    records = controller.bootstrap(features={"group.version": 1, "off.feature": 0})
    assert records == [
        FeatureLevelRecord("metadata.version", LATEST_METADATA_VERSION),
        FeatureLevelRecord("group.version", 1),
        FeatureLevelRecord("transaction.version", 2),  # Kafka 4.0's default
    ]
    controller.replay(records)
    assert controller.image.features == {
        "metadata.version": 25, "group.version": 1, "transaction.version": 2,
    }  # fmt: skip
    assert controller.bootstrap() == []


def test_bootstrap_defaults_give_way_to_what_format_chose() -> None:
    records = _fresh().bootstrap(features={"transaction.version": 0})
    assert records == [FeatureLevelRecord("metadata.version", LATEST_METADATA_VERSION)]
    old = _fresh().bootstrap(metadata_version=20)  # before 4.0-IV2: no transactions v2
    assert old == [FeatureLevelRecord("metadata.version", 20)]


def test_bootstrap_rejects_unknown_level() -> None:
    with pytest.raises(ValueError, match=r"metadata\.version"):
        _fresh().bootstrap(metadata_version=99)


def test_registration_records() -> None:
    controller = _fresh(
        {
            "listeners": "PLAINTEXT://:9092,SECURE://:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:PLAINTEXT",
            "broker.rack": "rack-a",
        }
    )
    controller.replay(controller.bootstrap())
    endpoints = [Listener("PLAINTEXT", "h", 9092), Listener("SECURE", "h", 9093)]
    request = controller.local_registration(endpoints, uuid.UUID(int=7))
    result = controller.broker_registration(request, broker_epoch=17, now_ms=0)
    (register,) = result.records
    assert isinstance(register, RegisterBrokerRecord)
    assert (register.broker_id, register.broker_epoch, register.fenced, register.rack) == (
        1,
        17,
        True,
        "rack-a",
    )
    assert register.incarnation_id == uuid.UUID(int=7)
    assert [(e.name, e.port, e.security_protocol) for e in register.end_points] == [
        ("PLAINTEXT", 9092, 0),
        ("SECURE", 9093, 0),  # the listener's protocol id (PLAINTEXT); SSL listeners fail closed
    ]
    assert [
        (f.name, f.min_supported_version, f.max_supported_version) for f in register.features
    ] == [
        ("metadata.version", 7, 25),
        ("eligible.leader.replicas.version", 0, 1),
        ("transaction.version", 0, 2),
    ]
    assert commit(controller, result).broker_epoch == 17
    node = controller.image.broker(1)
    assert node is not None
    assert node.fenced  # until its first heartbeat
    assert node.rack == "rack-a"


def test_registration_needs_a_bootstrapped_cluster() -> None:
    controller = _fresh()
    with pytest.raises(ControllerError) as info:
        controller.broker_registration(
            controller.local_registration([], uuid.UUID(int=1)), broker_epoch=0, now_ms=0
        )
    assert info.value.error.code == ErrorCode.UNSUPPORTED_VERSION


def test_producer_id_blocks() -> None:
    controller = make_controller()
    first = controller.allocate_producer_ids(1, 1)
    assert first.response == (0, PRODUCER_ID_BLOCK_SIZE)
    assert first.records == [ProducerIdsRecord(1, 1, 1000)]
    assert controller.allocate_producer_ids(1, 1).response == (0, 1000)  # nothing replayed yet
    commit(controller, first)
    assert commit(controller, controller.allocate_producer_ids(1, 1)) == (1000, 1000)
    assert controller.image.next_producer_id == 2000


@pytest.mark.parametrize(("broker", "epoch"), [(1, 99), (5, 1)])
def test_producer_ids_check_broker_epoch(broker: int, epoch: int) -> None:
    with pytest.raises(ControllerError) as info:
        make_controller().allocate_producer_ids(broker, epoch)
    assert info.value.error.code == ErrorCode.STALE_BROKER_EPOCH


def test_producer_ids_exhausted() -> None:
    controller = make_controller()
    controller.replay([ProducerIdsRecord(1, 1, 2**63 - 10)])
    with pytest.raises(ControllerError) as info:
        controller.allocate_producer_ids(1, 1)
    assert info.value.error.code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_versions_outside_range_are_programming_errors() -> None:
    with pytest.raises(ValueError, match="no version 1"):
        make_controller().create_topics(CreateTopicsRequest(), 1)


def test_commands_do_not_touch_the_image() -> None:
    controller = make_controller()
    image = controller.image
    controller.create_topics(
        CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic("t", 1, 1)]), 7
    )
    assert controller.image is image


def test_stage_then_adopt() -> None:
    controller = make_controller()
    image = controller.image
    result = controller.create_topics(
        CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic("t", 1, 1)]), 7
    )
    delta = controller.stage(result.records)
    assert controller.image is image  # staging changes nothing
    assert delta.apply().topic("t") is not None
    controller.adopt(delta)
    assert controller.image is delta.apply()
    with pytest.raises(ValueError, match="older image"):
        controller.adopt(delta)
    with pytest.raises(RuntimeError, match="already been applied"):
        delta.replay(ProducerIdsRecord(1, 1, 5000))


def test_stage_refuses_records_that_do_not_apply() -> None:
    controller = make_controller()
    with pytest.raises(MetadataError):
        controller.stage([ProducerIdsRecord(1, 1, 0)])
