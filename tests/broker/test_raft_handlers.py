"""The Raft RPC handlers on the single node of `strom serve`, a one-voter quorum.

The replication RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot) are registered for
CONTROLLER listeners only, where the node's Raft replica answers them as Kafka's standalone
controller does; on a client listener they close the connection. DescribeQuorum is served on
both kinds of listener (a broker forwards it in a cluster; a standalone node describes itself,
tests/broker/test_broker_registration.py). Fetch on the client listener is the data path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.coordinator.raft import messages, wire
from strom.wire.errors import ErrorCode, ProtocolError
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


async def test_a_one_voter_quorum_refuses_a_vote_for_a_node_outside_it(
    controller_client: KafkaClient,
) -> None:
    """Node 2 asks the single node (the quorum of node 1 alone) for its vote in a later epoch."""
    ask = messages.VoteRequest(7, 99, candidate_id=2, last_epoch=99, end_offset=10**6, pre_vote=False)
    body = wire.request_to_wire(ask, 1, None, 2)
    response = await controller_client.request(body, 2, VoteResponse)
    [partition] = response.topics[0].partitions
    assert partition.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert not partition.vote_granted
    assert (partition.leader_id, partition.leader_epoch) == (1, 1)


async def test_raft_apis_close_the_connection_on_a_client_listener(client: KafkaClient) -> None:
    with pytest.raises(ProtocolError, match="closed"):
        await client.request(VoteRequest(cluster_id=None, voter_id=1), 2, VoteResponse)
