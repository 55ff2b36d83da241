"""Builders for the leadership and reassignment tests: a 4-broker cluster, fencing, ISR changes."""

from __future__ import annotations

import uuid

from strom.coordinator.controller import Controller
from strom.coordinator.metadata.image import PartitionImage
from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.controller.helpers import commit, create, make_controller, topic

BROKER_EPOCH = {1: 1, 2: 102, 3: 103, 4: 104}
"""Broker epochs as the helpers register them (node 1 at 1, broker n at 100 + n)."""
TOPIC_RESOURCE = 2


def cluster(
    replicas: list[int], *, brokers: int = 4, configs: dict[str, str | None] | None = None,
    props: dict[str, str] | None = None,
) -> tuple[Controller, uuid.UUID]:  # fmt: skip
    """Topic "t" with one partition on `replicas` (ISR = all of them, leader the first)."""
    controller = make_controller(props, brokers=brokers)
    created = create(
        controller,
        topic("t", partitions=-1, replication=-1, assignments=[(0, replicas)], configs=configs),
    )
    assert created.topics[0].error_code == 0, created.topics[0].error_message
    return controller, created.topics[0].topic_id


def part(controller: Controller, topic_id: uuid.UUID, index: int = 0) -> PartitionImage:
    found = controller.image.topics_by_id[topic_id].partition(index)
    assert found is not None
    return found


def fence(controller: Controller, broker_id: int) -> None:
    """The broker asks to be fenced (as a lapsed lease would fence it)."""
    request = BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=BROKER_EPOCH[broker_id],
        current_metadata_offset=10**6,
        want_fence=True,
    )
    commit(controller, controller.broker_heartbeat(request, next_offset=10**6, now_ms=0))
    registration = controller.image.broker(broker_id)
    assert registration is not None
    assert registration.fenced


def unfence(controller: Controller, broker_id: int) -> None:
    request = BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=BROKER_EPOCH[broker_id], current_metadata_offset=10**6
    )
    commit(controller, controller.broker_heartbeat(request, next_offset=10**6, now_ms=0))
    registration = controller.image.broker(broker_id)
    assert registration is not None
    assert not registration.fenced


def alter_isr(
    controller: Controller, topic_id: uuid.UUID, isr: list[int], *, version: int = 3,
    recovery: int | None = None,
) -> AlterPartitionResponse.PartitionData:  # fmt: skip
    """The partition leader's AlterPartition with `isr` (committed); its partition answer."""
    current = part(controller, topic_id)
    data = AlterPartitionRequest.PartitionData(
        partition_index=0,
        leader_epoch=current.leader_epoch,
        new_isr=isr if version < 3 else [],
        new_isr_with_epochs=[AlterPartitionRequest.BrokerState(b, BROKER_EPOCH[b]) for b in isr]
        if version >= 3
        else [],
        leader_recovery_state=current.leader_recovery_state if recovery is None else recovery,
        partition_epoch=current.partition_epoch,
    )
    request = AlterPartitionRequest(
        broker_id=current.leader,
        broker_epoch=BROKER_EPOCH[current.leader],
        topics=[AlterPartitionRequest.TopicData(topic_id, [data])],
    )
    response = commit(controller, controller.alter_partition(request, version))
    assert response.error_code == 0
    return response.topics[0].partitions[0]


def set_topic_config(controller: Controller, name: str, key: str, value: str | None) -> None:
    """IncrementalAlterConfigs SET (or DELETE for None) of one topic config."""
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                TOPIC_RESOURCE,
                name,
                [IncrementalAlterConfigsRequest.AlterableConfig(key, 0 if value else 1, value)],
            )
        ]
    )
    response = commit(controller, controller.incremental_alter_configs(request, 1))
    assert response.responses[0].error_code == 0, response.responses[0].error_message
