"""BrokerRegistration and BrokerHeartbeat over the wire, on a real broker's CONTROLLER listener.

A second broker (id 2) registers with the combined node's controller as a remote broker will,
heartbeats until unfenced, and loses its lease when it stops; its single-replica partition then
shows as offline (leader -1) in Metadata. Client listeners refuse the controller APIs the way
Kafka's do: the connection closes.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from strom.wire.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

pytestmark = pytest.mark.trio


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
        # short leases, so a stopped broker is fenced within the test
        "broker.heartbeat.interval.ms": "50",
        "broker.session.timeout.ms": "600",
    }


@pytest.fixture
async def controller_client(broker: EmbeddedBroker) -> AsyncIterator[KafkaClient]:
    [listener] = broker.broker.controller_endpoints
    assert listener.name == "CONTROLLER"
    client = await KafkaClient.connect(f"{listener.host}:{listener.port}", "broker-2")
    yield client
    await client.aclose()


def _registration(broker: EmbeddedBroker, **fields: object) -> BrokerRegistrationRequest:
    state = broker.broker.state
    assert state is not None
    request = BrokerRegistrationRequest(
        broker_id=2,
        cluster_id=state.cluster_id,
        incarnation_id=uuid.UUID(int=2),
        listeners=[BrokerRegistrationRequest.Listener("PLAINTEXT", "127.0.0.1", 19092, 0)],
        features=[BrokerRegistrationRequest.Feature("metadata.version", 7, 25)],
        rack="r2",
    )
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def _offset(broker: EmbeddedBroker) -> int:
    state = broker.broker.state
    assert state is not None
    return state.image.provenance.offset


async def _join(broker: EmbeddedBroker, client: KafkaClient, version: int = 4) -> int:
    registered = await client.request(_registration(broker), version, BrokerRegistrationResponse)
    assert registered.error_code == ErrorCode.NONE
    heartbeat = BrokerHeartbeatRequest(
        broker_id=2, broker_epoch=registered.broker_epoch, current_metadata_offset=_offset(broker)
    )
    response = await client.request(heartbeat, 1, BrokerHeartbeatResponse)
    assert (response.error_code, response.is_caught_up, response.is_fenced) == (0, True, False)
    return registered.broker_epoch


async def test_controller_listener_advertises_the_controller_apis(
    controller_client: KafkaClient, client: KafkaClient
) -> None:
    request = ApiVersionsRequest("strom-test", "1.0")
    on_controller = await controller_client.request(request, 3, ApiVersionsResponse)
    controller_keys = {k.api_key for k in on_controller.api_keys}
    assert {18, 19, 62, 63} <= controller_keys
    assert 0 not in controller_keys  # Produce: a broker API
    on_client = await client.request(request, 3, ApiVersionsResponse)
    client_keys = {k.api_key for k in on_client.api_keys}
    assert {0, 18, 19} <= client_keys
    assert not {62, 63, 67} & client_keys
    assert {55, 60} <= client_keys & controller_keys  # DescribeQuorum, DescribeCluster: both


@pytest.mark.parametrize("version", range(5))
async def test_a_remote_broker_registers_and_is_unfenced_by_heartbeat(
    broker: EmbeddedBroker, controller_client: KafkaClient, version: int
) -> None:
    registered = await controller_client.request(
        _registration(broker), version, BrokerRegistrationResponse
    )
    assert registered.error_code == ErrorCode.NONE
    state = broker.broker.state
    assert state is not None
    two = state.image.broker(2)
    assert two is not None
    assert (two.epoch, two.fenced, two.rack) == (registered.broker_epoch, True, "r2")
    assert [(e.name, e.port) for e in two.endpoints] == [("PLAINTEXT", 19092)]

    behind = BrokerHeartbeatRequest(
        broker_id=2, broker_epoch=registered.broker_epoch, current_metadata_offset=0
    )
    response = await controller_client.request(behind, 0, BrokerHeartbeatResponse)
    assert (response.is_caught_up, response.is_fenced) == (False, True)
    behind.current_metadata_offset = _offset(broker)
    response = await controller_client.request(behind, 1, BrokerHeartbeatResponse)
    assert (response.error_code, response.is_caught_up, response.is_fenced) == (0, True, False)
    two = state.image.broker(2)
    assert two is not None
    assert not two.fenced


async def test_registration_errors_over_the_wire(
    broker: EmbeddedBroker, controller_client: KafkaClient
) -> None:
    wrong = _registration(broker, cluster_id="not-this-cluster")
    response = await controller_client.request(wrong, 4, BrokerRegistrationResponse)
    assert (response.error_code, response.broker_epoch) == (ErrorCode.INCONSISTENT_CLUSTER_ID, -1)
    epoch = await _join(broker, controller_client)
    other = _registration(broker, incarnation_id=uuid.UUID(int=99))
    response = await controller_client.request(other, 4, BrokerRegistrationResponse)
    assert response.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    stale = BrokerHeartbeatRequest(broker_id=2, broker_epoch=epoch - 1)
    beat = await controller_client.request(stale, 1, BrokerHeartbeatResponse)
    assert beat.error_code == ErrorCode.STALE_BROKER_EPOCH


async def test_controller_apis_close_the_connection_on_a_client_listener(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    with pytest.raises(ProtocolError, match="closed"):
        await client.request(_registration(broker), 4, BrokerRegistrationResponse)


async def test_a_broker_whose_lease_expires_is_fenced_and_its_partitions_go_offline(
    broker: EmbeddedBroker, controller_client: KafkaClient, client: KafkaClient
) -> None:
    await _join(broker, controller_client)
    assignment = CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=[2])
    topic = CreateTopicsRequest.CreatableTopic(
        name="on-two", num_partitions=-1, replication_factor=-1, assignments=[assignment]
    )
    created = await client.request(CreateTopicsRequest(topics=[topic]), 7, CreateTopicsResponse)
    assert created.topics[0].error_code == ErrorCode.NONE
    metadata = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
    [partition] = next(t for t in metadata.topics if t.name == "on-two").partitions
    assert (partition.error_code, partition.leader_id) == (ErrorCode.NONE, 2)

    # broker 2 stops heartbeating; node 1 keeps its own lease (it heartbeats every 50 ms)
    state = broker.broker.state
    assert state is not None
    fenced = trio.Event()

    def watch(image: MetadataImage) -> None:
        two = image.broker(2)
        if two is not None and two.fenced:
            fenced.set()

    state.controller.subscribe(watch)
    with trio.fail_after(10):
        await fenced.wait()

    metadata = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
    [partition] = next(t for t in metadata.topics if t.name == "on-two").partitions
    assert (partition.error_code, partition.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert partition.isr_nodes == [2]
    assert [b.node_id for b in metadata.brokers] == [1]  # a fenced broker is not listed
    node = state.image.broker(1)
    assert node is not None
    assert not node.fenced  # the local broker's heartbeats kept its lease
    cluster = await client.request(
        DescribeClusterRequest(include_fenced_brokers=True), 2, DescribeClusterResponse
    )
    assert [(b.broker_id, b.is_fenced) for b in cluster.brokers] == [(1, False), (2, True)]


async def test_describe_cluster_on_the_controller_listener_describes_the_controllers(
    controller_client: KafkaClient,
) -> None:
    """KIP-919: `kafka-metadata-quorum --bootstrap-controller` asks a controller listener for
    controllers; brokers are asked for on a broker listener."""
    controllers = await controller_client.request(
        DescribeClusterRequest(endpoint_type=2), 1, DescribeClusterResponse
    )
    assert (controllers.error_code, controllers.endpoint_type) == (ErrorCode.NONE, 2)
    assert controllers.controller_id == 1
    wrong = await controller_client.request(
        DescribeClusterRequest(endpoint_type=1), 1, DescribeClusterResponse
    )
    assert wrong.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    assert wrong.error_message is not None
    assert "endpoint of type CONTROLLER" in wrong.error_message


@pytest.mark.parametrize("on_controller_listener", [False, True])
async def test_a_standalone_node_describes_itself_as_a_one_voter_quorum(
    broker: EmbeddedBroker,
    client: KafkaClient,
    controller_client: KafkaClient,
    on_controller_listener: bool,
) -> None:
    asked = controller_client if on_controller_listener else client
    request = DescribeQuorumRequest(
        topics=[
            DescribeQuorumRequest.TopicData(
                "__cluster_metadata", [DescribeQuorumRequest.PartitionData(0)]
            )
        ]
    )
    response = await asked.request(request, 2, DescribeQuorumResponse)
    [partition] = response.topics[0].partitions
    end = _offset(broker) + 1
    assert (partition.error_code, partition.leader_id) == (ErrorCode.NONE, 1)
    assert partition.high_watermark == end
    assert [(v.replica_id, v.log_end_offset) for v in partition.current_voters] == [(1, end)]
    assert partition.observers == []
