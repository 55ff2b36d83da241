"""The active controller's leadership check on a real single node: auto leader rebalance and
unclean elections a dynamic config change allows (the watch_leadership loop in the broker)."""

from __future__ import annotations

import uuid

import pytest
import trio

from strom.broker.drivers.quorum_controller import QuorumController
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.config.values import ConfigResource
from strom.coordinator.controller.result import ControllerResult
from strom.coordinator.metadata.image import MetadataImage, PartitionImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.broker_registration import BrokerRegistrationRequest
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from tests.broker.test_forwarding import _driver

pytestmark = pytest.mark.trio


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {"broker.session.timeout.ms": "600000"}  # broker 2 heartbeats only when told


@pytest.fixture
async def driver(broker: EmbeddedBroker) -> QuorumController:
    """The node's controller with a second broker registered and unfenced."""
    controller = _driver(broker)
    registered = await controller.broker_registration(
        BrokerRegistrationRequest(
            broker_id=2,
            cluster_id=controller.cluster_id,
            incarnation_id=uuid.UUID(int=2),
            listeners=[BrokerRegistrationRequest.Listener("PLAINTEXT", "127.0.0.1", 19092, 0)],
            features=[BrokerRegistrationRequest.Feature("metadata.version", 7, 25)],
        )
    )
    assert registered.error_code == ErrorCode.NONE
    await _heartbeat(controller, registered.broker_epoch)
    return controller


async def _heartbeat(driver: QuorumController, epoch: int, *, fence: bool = False) -> None:
    response = await driver.broker_heartbeat(
        BrokerHeartbeatRequest(
            broker_id=2, broker_epoch=epoch, current_metadata_offset=10**9, want_fence=fence
        )
    )
    assert response.error_code == ErrorCode.NONE
    assert response.is_fenced is fence


async def _create(client: KafkaClient, name: str, replicas: list[int]) -> uuid.UUID:
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name, -1, -1, [CreateTopicsRequest.CreatableReplicaAssignment(0, replicas)]
            )
        ],
        timeout_ms=30_000,
    )
    [result] = (await client.request(request, 7, CreateTopicsResponse)).topics
    assert result.error_code == ErrorCode.NONE, result.error_message
    return result.topic_id


async def _change(driver: QuorumController, record: PartitionChangeRecord) -> None:
    """Write a partition change as the replication machinery's AlterPartition would."""
    await driver._run_command(lambda _offset: ControllerResult(None, [record]))


def _partition(image: MetadataImage, name: str) -> PartitionImage:
    found = image.partition(name, 0)
    assert found is not None
    return found


async def test_the_check_moves_leadership_back_to_the_preferred_replica(
    driver: QuorumController, client: KafkaClient
) -> None:
    topic_id = await _create(client, "pref", [1, 2])
    assert _partition(driver.image, "pref").leader == 1
    await _change(driver, PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2))
    assert _partition(driver.image, "pref").leader == 2
    await driver.check_leadership()
    assert _partition(driver.image, "pref").leader == 1


@pytest.mark.parametrize(
    "broker_overrides",
    [{"broker.session.timeout.ms": "600000", "auto.leader.rebalance.enable": "false"}],
)
async def test_without_auto_rebalance_leadership_stays(
    driver: QuorumController, client: KafkaClient
) -> None:
    topic_id = await _create(client, "stay", [1, 2])
    await _change(driver, PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2))
    await driver.check_leadership()
    assert _partition(driver.image, "stay").leader == 2


async def test_enabling_unclean_election_elects_a_leaderless_partition_at_once(
    driver: QuorumController, client: KafkaClient
) -> None:
    topic_id = await _create(client, "u", [2, 1])
    await _change(driver, PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=[2]))
    registration = driver.image.broker(2)
    assert registration is not None
    await _heartbeat(driver, registration.epoch, fence=True)
    before = _partition(driver.image, "u")
    assert (before.leader, before.isr) == (-1, (2,))

    elected = trio.Event()

    def watch(image: MetadataImage) -> None:
        if _partition(image, "u").leader == 1:
            elected.set()

    unsubscribe = driver.subscribe(watch)
    try:
        request = IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    ConfigResource.TOPIC,
                    "u",
                    [
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            "unclean.leader.election.enable", 0, "true"
                        )
                    ],
                )
            ]
        )
        altered = await client.request(request, 1, IncrementalAlterConfigsResponse)
        assert [r.error_code for r in altered.responses] == [ErrorCode.NONE]
        with trio.fail_after(10):  # the loop runs at once, not after the 300 s interval
            await elected.wait()
    finally:
        unsubscribe()
    after = _partition(driver.image, "u")
    assert (after.leader, after.isr, after.leader_recovery_state) == (1, (1,), 1)
