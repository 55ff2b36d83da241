"""The Raft RPC handlers on a node that runs no Raft driver (the single-node default).

The replication RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot) are registered for
CONTROLLER listeners only; the one-voter quorum of a combined node needs no peers, so one
reaching it closes the connection, as before the handlers existed. DescribeQuorum is served on
both kinds of listener (a broker forwards it in a cluster; a standalone node describes itself,
tests/broker/test_broker_registration.py). Fetch on the client listener is the data path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ProtocolError
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.vote import VoteRequest, VoteResponse

pytestmark = pytest.mark.trio

RAFT_APIS = {52: (0, 2), 53: (0, 1), 54: (0, 1), 59: (0, 1)}
"""The peers' RPCs: controller listeners only."""
DESCRIBE_QUORUM = 55


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
    }


@pytest.fixture
async def controller_client(broker: EmbeddedBroker) -> AsyncIterator[KafkaClient]:
    [listener] = broker.broker.controller_endpoints
    client = await KafkaClient.connect(f"{listener.host}:{listener.port}", "raft-peer")
    yield client
    await client.aclose()



async def test_the_raft_apis_are_advertised_on_the_controller_listener_only(
    controller_client: KafkaClient, client: KafkaClient
) -> None:
    request = ApiVersionsRequest("strom-test", "1.0")
    on_controller = await controller_client.request(request, 3, ApiVersionsResponse)
    listed = {k.api_key: (k.min_version, k.max_version) for k in on_controller.api_keys}
    assert {key: listed.get(key) for key in RAFT_APIS} == RAFT_APIS
    assert 1 in listed  # Fetch: the metadata partition's, on this listener
    on_client = await client.request(request, 3, ApiVersionsResponse)
    assert not set(RAFT_APIS) & {k.api_key for k in on_client.api_keys}
    assert DESCRIBE_QUORUM in listed
    assert DESCRIBE_QUORUM in {k.api_key for k in on_client.api_keys}


async def test_a_node_without_a_raft_driver_closes_the_connection(
    controller_client: KafkaClient,
) -> None:
    with pytest.raises(ProtocolError, match="closed"):
        await controller_client.request(VoteRequest(cluster_id=None, voter_id=1), 2, VoteResponse)


async def test_raft_apis_close_the_connection_on_a_client_listener(client: KafkaClient) -> None:
    with pytest.raises(ProtocolError, match="closed"):
        await client.request(VoteRequest(cluster_id=None, voter_id=1), 2, VoteResponse)
