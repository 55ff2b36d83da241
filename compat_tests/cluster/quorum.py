"""What the cluster tests ask single nodes, over the repo's raw client (`KafkaClient`): the
controller quorum (DescribeQuorum, as `kafka-metadata-quorum describe --status` asks it) and one
node's own Metadata (a stock client would ask whichever broker it likes)."""

from __future__ import annotations

from dataclasses import dataclass

import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.client import describe_quorum as describe_quorum_at
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.describe_quorum import DescribeQuorumResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

REQUEST_TIMEOUT = 5.0
DESCRIBE_TIMEOUT = 0.3
"""A live node answers DescribeQuorum in milliseconds; a paused one never does, and waiting
longer for it would only delay the poll (and the election times the tests measure)."""


@dataclass(frozen=True)
class QuorumState:
    """The quorum as its leader describes it."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict[int, int]
    """Voter id -> log end offset."""
    observers: dict[int, int]


async def _describe(address: str) -> DescribeQuorumResponse.PartitionData:
    with trio.fail_after(DESCRIBE_TIMEOUT):
        response = await describe_quorum_at(address)
    [topic] = response.topics
    [partition] = topic.partitions
    return partition


def describe_quorum(node: ClusterNode) -> DescribeQuorumResponse.PartitionData | None:
    """DescribeQuorum on the node's controller listener (None: no answer)."""
    try:
        return trio.run(_describe, node.controller_address)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError):
        # a dead, paused or closing node
        return None


def quorum_state(cluster: ClusterProcess) -> QuorumState | None:
    """The quorum as the live leader reports it (None while no live controller leads). Every
    live controller is asked at once, so a paused one (connected, never answering) delays
    nothing: the leader's answer is taken as soon as it comes."""
    addresses = [n.controller_address for n in cluster.controllers if n.alive]

    async def ask_all() -> DescribeQuorumResponse.PartitionData | None:
        found: list[DescribeQuorumResponse.PartitionData] = []
        async with trio.open_nursery() as nursery:

            async def ask(address: str) -> None:
                try:
                    answer = await _describe(address)
                except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError):
                    return
                if answer.error_code == ErrorCode.NONE:
                    found.append(answer)
                    nursery.cancel_scope.cancel()

            for address in addresses:
                nursery.start_soon(ask, address)
        return found[0] if found else None

    answer = trio.run(ask_all)
    if answer is None:
        return None
    return QuorumState(
        answer.leader_id,
        answer.leader_epoch,
        answer.high_watermark,
        {v.replica_id: v.log_end_offset for v in answer.current_voters},
        {o.replica_id: o.log_end_offset for o in answer.observers},
    )


async def _topics(address: str) -> set[str]:
    with trio.fail_after(REQUEST_TIMEOUT):
        client = await KafkaClient.connect(address)
        try:
            response = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
        finally:
            await client.aclose()
    return {t.name for t in response.topics if t.name is not None and t.error_code == 0}


def topics_on(node: ClusterNode) -> set[str]:
    """The topics in this one broker's Metadata answer (none while it does not answer yet: a
    restarted node serves clients only once it is unfenced)."""
    try:
        return trio.run(_topics, node.bootstrap)
    except trio.TooSlowError:
        return set()


def leader_seen_by(nodes: list[ClusterNode]) -> QuorumState | None:
    """The quorum as the first of `nodes` that leads it describes it (None: none of them
    leads). Only these nodes are asked: a node cut off from them may still think it leads."""
    for node in nodes:
        answer = describe_quorum(node)
        if answer is not None and answer.error_code == ErrorCode.NONE:
            return QuorumState(
                answer.leader_id,
                answer.leader_epoch,
                answer.high_watermark,
                {v.replica_id: v.log_end_offset for v in answer.current_voters},
                {o.replica_id: o.log_end_offset for o in answer.observers},
            )
    return None


async def _create(address: str, name: str, replicas: list[int] | None, timeout_ms: int) -> int:
    assignments = (
        [CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)]
        if replicas
        else []
    )
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=-1 if replicas else 1,
        replication_factor=-1 if replicas else 1,
        assignments=assignments,
    )
    with trio.fail_after(timeout_ms / 1000 + REQUEST_TIMEOUT):
        client = await KafkaClient.connect(address, "adminclient")
        try:
            response = await client.request(
                CreateTopicsRequest(topics=[topic], timeout_ms=timeout_ms), 7, CreateTopicsResponse
            )
        finally:
            await client.aclose()
    [created] = response.topics
    return int(created.error_code)


def create_topic_via(
    node: ClusterNode, name: str, *, replicas: list[int] | None = None, timeout_ms: int = 10_000
) -> int | None:
    """CreateTopics (one partition, on `replicas` if given) sent to this one node's client
    listener, as an admin client whose metadata named it the controller would send it. The
    error code of the answer; None if no answer came in time."""
    try:
        return trio.run(_create, node.bootstrap, name, replicas, timeout_ms)
    except (trio.TooSlowError, trio.BrokenResourceError, ProtocolError, OSError):
        return None


async def _leaders(address: str, topic: str) -> dict[int, int]:
    with trio.fail_after(REQUEST_TIMEOUT):
        client = await KafkaClient.connect(address)
        try:
            request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
            response = await client.request(request, 12, MetadataResponse)
        finally:
            await client.aclose()
    [answer] = response.topics
    return {p.partition_index: p.leader_id for p in answer.partitions}


def partition_leaders(node: ClusterNode, topic: str) -> dict[int, int]:
    """Partition -> leader id in this one broker's Metadata ({} while it does not know the
    topic)."""
    return trio.run(_leaders, node.bootstrap, topic)
