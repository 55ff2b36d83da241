"""DescribeQuorum (key 55): the state of the controller quorum, as `kafka-metadata-quorum` shows.

Behavior:
- On a client (broker) listener of a quorum member the request is forwarded to the active
  controller, as Kafka's brokers do (`kafka-metadata-quorum --bootstrap-server`); REQUEST_TIMED_OUT
  (top level) when no controller answers in time.
- A standalone node (no multi-node quorum: `strom serve` by default) is a one-voter quorum of
  itself and answers on any listener, from its Raft driver as below.
- On a controller listener of a quorum member it answers from its Raft driver (`RaftCore.describe`):
  leader id and epoch, high watermark, and each voter's and observer's log end offset, last
  fetch and last caught-up times in ms since the epoch (the lag is the high watermark minus
  the log end offset).
- Only the leader knows the replicas' progress: any other voter answers the partition with
  NOT_LEADER_OR_FOLLOWER (the tool asks again elsewhere). A topic or partition other than
  `__cluster_metadata-0` is UNKNOWN_TOPIC_OR_PARTITION.

Version notes: v0 flexible (KIP-595); v1 last fetch and caught-up timestamps (KIP-836); v2
directory ids (zero) and the voters' endpoints (their `controller.quorum.voters` addresses, on
the first of `controller.listener.names`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward
from strom.broker.handlers.raft_rpc import driver
from strom.coordinator.raft import wire
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeQuorumRequest
) -> DescribeQuorumResponse:
    if broker.config.runs_quorum and request.listener not in broker.config.controller_listeners:
        return await forward(broker, request, body, DescribeQuorumResponse)
    raft = driver(broker, request)
    unknown = _unknown_partitions(body)
    if unknown is not None:
        return unknown
    response = wire.describe_quorum_response(raft.describe())
    if request.api_version >= 2 and broker.config.controller_listeners:
        # v2: the voters' endpoints, on the controller listener their addresses are for
        name = broker.config.controller_listeners[0]
        response.nodes = [
            DescribeQuorumResponse.Node(
                node_id, [DescribeQuorumResponse.Listener(name, address.host, address.port)]
            )
            for node_id, address in sorted(broker.config.quorum_voters.items())
        ]
    return response


def _unknown_partitions(body: DescribeQuorumRequest) -> DescribeQuorumResponse | None:
    """The answer when anything but `__cluster_metadata-0` is asked for, else None."""
    wanted = [(t.topic_name, p.partition_index) for t in body.topics for p in t.partitions]
    if wanted == [(wire.METADATA_TOPIC, wire.METADATA_PARTITION)]:
        return None
    return DescribeQuorumResponse(
        topics=[
            DescribeQuorumResponse.TopicData(
                topic,
                [
                    DescribeQuorumResponse.PartitionData(
                        partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                ],
            )
            for topic, p in wanted
        ]
    )
