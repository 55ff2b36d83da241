"""DescribeCluster: every version, endpoint types, fenced brokers, authorized operations."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import cast

import pytest

from strom.broker.admin.authz import CLUSTER_OPERATIONS, NOT_REQUESTED
from strom.broker.handlers import describe_cluster
from strom.broker.handlers.request import RequestContext
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.config import BrokerConfig, Listener
from strom.coordinator.controller.liveness import OfflineReplicas
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord
from strom.wire.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse

pytestmark = pytest.mark.trio


@pytest.mark.parametrize("version", range(3))
async def test_every_version_lists_this_broker(
    broker: EmbeddedBroker, client: KafkaClient, version: int
) -> None:
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    response = await client.request(request, version, DescribeClusterResponse)
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    assert response.cluster_id
    assert response.controller_id == 1
    assert response.endpoint_type == 1
    [me] = response.brokers
    assert (me.broker_id, f"{me.host}:{me.port}", me.rack, me.is_fenced) == (
        1,
        broker.bootstrap,
        None,
        False,
    )
    assert response.cluster_authorized_operations == CLUSTER_OPERATIONS


async def test_operations_only_when_asked(client: KafkaClient) -> None:
    response = await client.request(DescribeClusterRequest(), 0, DescribeClusterResponse)
    assert response.cluster_authorized_operations == NOT_REQUESTED


@pytest.mark.parametrize(
    ("version", "endpoint_type", "code", "message"),
    [
        (
            1,
            2,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, "
            "but we wanted an endpoint of type CONTROLLER",
        ),
        (2, 7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7"),
        (1, 0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0"),
    ],
)
async def test_endpoint_types(
    client: KafkaClient, version: int, endpoint_type: int, code: int, message: str
) -> None:
    request = DescribeClusterRequest(endpoint_type=endpoint_type)
    response = await client.request(request, version, DescribeClusterResponse)
    assert (response.error_code, response.error_message) == (code, message)
    assert (response.brokers, response.cluster_id, response.controller_id) == ([], "", -1)


@dataclass
class _Controller:
    active_controller_id: int = 1


@dataclass
class _State:
    """The parts of BrokerState DescribeCluster and DescribeTopicPartitions read."""

    image: MetadataImage
    config: BrokerConfig = field(default_factory=BrokerConfig)
    node_id: int = 1
    cluster_id: str = "c"
    endpoints: list[Listener] = field(
        default_factory=lambda: [Listener("PLAINTEXT", "localhost", 9092)]
    )
    offline_replicas: OfflineReplicas = field(default_factory=OfflineReplicas)
    controller: _Controller = field(default_factory=lambda: _Controller())
    authorizer: None = None


def _registration(
    broker_id: int, *, fenced: bool, listener: str = "PLAINTEXT"
) -> RegisterBrokerRecord:
    endpoint = RegisterBrokerRecord.BrokerEndpoint(listener, f"h{broker_id}", 9000 + broker_id, 0)
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=uuid.uuid4(),
        broker_epoch=broker_id,
        end_points=[endpoint],
        rack=f"r{broker_id}",
        fenced=fenced,
    )


async def test_fenced_brokers_only_when_asked() -> None:
    image = MetadataImage.EMPTY.apply_all(
        [
            _registration(1, fenced=False),
            _registration(2, fenced=True),
            _registration(3, fenced=False, listener="OTHER"),
        ]
    )
    state = cast(BrokerState, _State(image))

    async def brokers(version: int, include_fenced: bool) -> list[tuple[int, str, bool]]:
        context = RequestContext(60, version, 1, None, "127.0.0.1", 1, "PLAINTEXT")
        body = DescribeClusterRequest(include_fenced_brokers=include_fenced)
        response = await describe_cluster.handle(state, context, body)
        return [(b.broker_id, f"{b.host}:{b.port}", b.is_fenced) for b in response.brokers]

    assert await brokers(2, False) == [(1, "localhost:9092", False)]
    assert await brokers(2, True) == [(1, "localhost:9092", False), (2, "h2:9002", True)]
