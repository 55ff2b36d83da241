"""Data replication in a 3-node combined cluster of `strom serve` children, with stock clients
(confluent-kafka) for producing and consuming and the repo's raw client for what a stock client
does not show (one node's Metadata, one replica's log end via ListOffsets as the debugging
replica -2, one Produce's exact error code).

- A topic with replication factor 3 and min.insync.replicas=2 takes acks=all produces; every
  replica's log ends at the same offset.
- kill -9 of the partition leader: the controller elects another ISR member, producing goes on,
  no acknowledged record is lost and a consumer reads each record once; the old leader, started
  again, catches up.
- A leader killed and started again at once hands its leadership over as soon as its new
  process registers (on the same log directories), not after its lease runs out.
- A leader whose tail never reached the others (its followers paused while it took acks=1
  records) truncates that tail when it returns as a follower.
- With a replica gone and min.insync.replicas=3, acks=all is NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import trio
from confluent_kafka import TopicPartition

from compat_tests.cluster.test_cluster import wait_for_leader, wait_for_topics
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import wait_until
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records.builder import build_batch
from strom.wire.records.record import Record

REQUEST_TIMEOUT = 5.0
DEBUGGING_REPLICA = -2
FAST = {
    "replica.lag.time.max.ms": "3000",
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    "replica.fetch.backoff.ms": "200",
}
"""Short failure detection, so the tests wait seconds, not Kafka's defaults."""


async def _ask(address: str, body: object, version: int, kind: type) -> object:
    with trio.fail_after(REQUEST_TIMEOUT):
        client = await KafkaClient.connect(address)
        try:
            return await client.request(body, version, kind)  # type: ignore[arg-type]
        finally:
            await client.aclose()


def _call(address: str, body: object, version: int, kind: type) -> object | None:
    try:
        return trio.run(_ask, address, body, version, kind)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError):
        return None


def partition_state(node: ClusterNode, topic: str, index: int = 0) -> tuple[int, list[int]] | None:
    """(leader, isr) of a partition in this node's Metadata (None: no answer)."""
    response = _call(node.bootstrap, MetadataRequest(topics=None), 12, MetadataResponse)
    if not isinstance(response, MetadataResponse):
        return None
    for t in response.topics:
        if t.name == topic:
            for p in t.partitions:
                if p.partition_index == index:
                    return p.leader_id, sorted(p.isr_nodes)
    return None


def log_end(node: ClusterNode, topic: str, index: int = 0) -> int | None:
    """The log end offset of this node's replica (ListOffsets latest as replica -2)."""
    request = ListOffsetsRequest(
        replica_id=DEBUGGING_REPLICA,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                topic, [ListOffsetsRequest.ListOffsetsPartition(index, -1, -1)]
            )
        ],
    )
    response = _call(node.bootstrap, request, 7, ListOffsetsResponse)
    if not isinstance(response, ListOffsetsResponse):
        return None
    [p] = response.topics[0].partitions
    return int(p.offset) if p.error_code == ErrorCode.NONE else None


def produce_error(node: ClusterNode, topic: str, acks: int = -1) -> int:
    """The error code of one raw Produce of one record to partition 0 at `node`."""
    batch = bytes(build_batch([Record(b"k", b"v", (), int(time.time() * 1000))]))
    request = ProduceRequest(
        acks=acks,
        timeout_ms=3000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                topic, [ProduceRequest.PartitionProduceData(0, batch)]
            )
        ],
    )
    response = _call(node.bootstrap, request, 9, ProduceResponse)
    assert isinstance(response, ProduceResponse)
    return int(response.responses[0].partition_responses[0].error_code)


def create(cluster: ClusterProcess, topic: str, replicas: int, min_insync: int) -> None:
    admin = ck.admin(cluster.bootstrap)
    new = ck.NewTopic(topic, num_partitions=1, replication_factor=replicas,
                   config={"min.insync.replicas": str(min_insync)})  # fmt: skip
    for future in admin.create_topics([new], operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    for node in cluster.nodes:
        wait_for_topics(node, topic)


def settled(cluster: ClusterProcess, topic: str, isr: int) -> tuple[int, list[int]]:
    """Until a live node reports a live leader and an ISR of `isr` members."""

    def check() -> tuple[int, list[int]] | None:
        for node in cluster.nodes:
            if not node.alive:
                continue
            state = partition_state(node, topic)
            if state is not None and state[0] >= 0 and cluster.node(state[0]).alive:
                return state if len(state[1]) == isr else None
        return None

    return wait_until(check, timeout=40, what=f"{topic}: a live leader and {isr} in-sync replicas",
                      interval=0.1)  # fmt: skip


def ends_equal(nodes: list[ClusterNode], topic: str, at_least: int) -> bool:
    ends = {log_end(n, topic) for n in nodes}
    return len(ends) == 1 and (end := ends.pop()) is not None and end >= at_least


def values(count: int, start: int = 0) -> Iterator[bytes]:
    return (f"record-{i}".encode() for i in range(start, start + count))


def produce(bootstrap: str, topic: str, batch: list[bytes]) -> list[int]:
    """acks=all produce of every value; the acknowledged offsets (failing on any error)."""
    producer = ck.producer(bootstrap, **{"message.timeout.ms": 60000})
    acked: list[int] = []
    failed: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked.append(msg.offset())  # type: ignore[attr-defined]

    for value in batch:
        producer.produce(topic, value=value, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert not failed, failed
    return acked


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = ck.consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        return [r.value or b"" for r in ck.consume(consumer, count, timeout=60)]
    finally:
        consumer.close()


def test_acks_all_replicates_and_survives_kill9_of_the_leader(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "replicated"
    create(cluster, topic, replicas=3, min_insync=2)
    leader, isr = settled(cluster, topic, 3)
    assert isr == [1, 2, 3]

    first = list(values(300))
    offsets = produce(cluster.bootstrap, topic, first)
    assert sorted(offsets) == list(range(300))
    wait_until(lambda: ends_equal(cluster.nodes, topic, 300), timeout=20,
               what="every replica's log ends at 300", interval=0.1)  # fmt: skip

    old = cluster.node(leader)
    old.kill9()
    survivors = [n for n in cluster.nodes if n is not old]
    new_leader, new_isr = settled(cluster, topic, 2)
    assert new_leader != leader
    assert leader not in new_isr

    second = list(values(200, 300))
    bootstrap = ",".join(n.bootstrap for n in survivors)
    produce(bootstrap, topic, second)
    wait_until(lambda: ends_equal(survivors, topic, 500), timeout=20,
               what="both survivors' logs end at 500", interval=0.1)  # fmt: skip
    assert consume_all(bootstrap, topic, 500) == first + second

    old.restart(clean=False)
    wait_until(lambda: ends_equal(cluster.nodes, topic, 500), timeout=30,
               what="the old leader caught up", interval=0.1)  # fmt: skip
    settled(cluster, topic, 3)  # back in the ISR


def test_a_leader_restarted_after_kill9_hands_over_without_waiting_for_its_lease(
    strom_cluster: StartCluster,
) -> None:
    """kill -9 of a partition leader and an immediate restart: the new process registers on
    the same log directories, which proves the old one gone, so the controller moves the
    leadership at once instead of after broker.session.timeout.ms (60 s here)."""
    cluster = strom_cluster(combined=3, overrides={**FAST, "broker.session.timeout.ms": "60000"})
    controller = wait_for_leader(cluster).leader_id
    victim, *others = [n for n in (1, 2, 3) if n != controller] + [controller]
    topic = "restarted"
    admin = ck.admin(cluster.bootstrap)
    new = ck.NewTopic(topic, num_partitions=1, replica_assignment=[[victim, *others]],
                      config={"min.insync.replicas": "2"})  # fmt: skip
    for future in admin.create_topics([new], operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    for node in cluster.nodes:
        wait_for_topics(node, topic)
    assert settled(cluster, topic, 3)[0] == victim
    produce(cluster.bootstrap, topic, list(values(100)))

    killed = time.monotonic()
    cluster.node(victim).restart(clean=False)

    def moved() -> int | None:
        state = partition_state(cluster.node(controller), topic)
        return state[0] if state is not None and state[0] not in (-1, victim) else None

    leader = wait_until(moved, timeout=30, what="a leader other than the restarted node",
                        interval=0.1)  # fmt: skip
    moved_after = time.monotonic() - killed
    print(f"\nleadership moved {moved_after:.2f}s after the kill -9 (lease: 60 s)")
    assert leader in others
    produce(cluster.bootstrap, topic, list(values(100, 100)))
    wait_until(lambda: ends_equal(cluster.nodes, topic, 200), timeout=30,
               what="the restarted node caught up", interval=0.1)  # fmt: skip
    settled(cluster, topic, 3)  # back in the ISR, by catching up
    assert consume_all(cluster.bootstrap, topic, 200) == list(values(200))


def test_a_returning_leader_truncates_its_unreplicated_tail(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "tail"
    create(cluster, topic, replicas=3, min_insync=2)
    leader, _ = settled(cluster, topic, 3)
    produce(cluster.bootstrap, topic, list(values(50)))
    wait_until(lambda: ends_equal(cluster.nodes, topic, 50), timeout=20,
               what="every replica's log ends at 50", interval=0.1)  # fmt: skip

    old = cluster.node(leader)
    followers = [n for n in cluster.nodes if n is not old]
    for node in followers:
        node.pause()
    try:
        for _ in range(5):  # acks=1: on the leader only, never replicated
            assert produce_error(old, topic, acks=1) == ErrorCode.NONE
        assert log_end(old, topic) == 55
        old.kill9()
    finally:
        for node in followers:
            node.resume()
    settled(cluster, topic, 2)
    bootstrap = ",".join(n.bootstrap for n in followers)
    produce(bootstrap, topic, list(values(20, 50)))
    wait_until(lambda: ends_equal(followers, topic, 70), timeout=20,
               what="both followers' logs end at 70", interval=0.1)  # fmt: skip

    # A follower may have taken the first acks=1 record: a fetch the leader answered just
    # before the pause is applied after it. The other four exist on the old leader only.
    end = log_end(followers[0], topic)
    assert end is not None
    assert 70 <= end <= 71

    old.restart(clean=False)
    wait_until(lambda: ends_equal(cluster.nodes, topic, end), timeout=30,
               what="the old leader truncated and caught up", interval=0.1)  # fmt: skip
    assert any("diverges from leader" in line for line in old.output), old.tail(50)
    assert log_end(old, topic) == end
    got = consume_all(bootstrap, topic, end)
    assert got[:50] == list(values(50))
    assert got[50 : end - 20] == [b"v"] * (end - 70)
    assert got[end - 20 :] == list(values(20, 50))


@pytest.mark.parametrize("min_insync", [3])
def test_not_enough_replicas(strom_cluster: StartCluster, min_insync: int) -> None:
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "strict"
    create(cluster, topic, replicas=3, min_insync=min_insync)
    leader, _ = settled(cluster, topic, 3)
    assert produce_error(cluster.node(leader), topic) == ErrorCode.NONE
    victim = next(n for n in cluster.nodes if n.node_id != leader)
    victim.kill9()
    leader, _ = settled(cluster, topic, 2)
    assert produce_error(cluster.node(leader), topic) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_error(cluster.node(leader), topic, acks=1) == ErrorCode.NONE


def test_split_roles_replicate_between_broker_only_nodes(strom_cluster: StartCluster) -> None:
    """Controllers 1-3, brokers 4 and 5: the partition leader is never a controller, so its ISR
    changes reach the active controller over the network (AlterPartition on a CONTROLLER
    listener). A broker that returns rejoins the ISR that way."""
    cluster = strom_cluster(controllers=3, brokers=2, overrides=FAST)
    wait_for_leader(cluster)
    topic = "split"
    admin = ck.admin(cluster.bootstrap)
    new = ck.NewTopic(topic, num_partitions=1, replication_factor=2,
                      config={"min.insync.replicas": "2"})  # fmt: skip
    for future in admin.create_topics([new], operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    brokers = cluster.brokers
    for node in brokers:
        wait_for_topics(node, topic)

    def state() -> tuple[int, list[int]] | None:
        for node in brokers:
            if node.alive and (found := partition_state(node, topic)) is not None:
                return found
        return None

    def led() -> tuple[int, list[int]] | None:
        found = state()
        return found if found is not None and found[0] >= 0 else None

    leader, isr = wait_until(led, timeout=30, what="a leader", interval=0.1)
    assert isr == [4, 5]
    produce(cluster.bootstrap, topic, list(values(100)))
    wait_until(lambda: ends_equal(brokers, topic, 100), timeout=20,
               what="both replicas end at 100", interval=0.1)  # fmt: skip

    follower = next(n for n in brokers if n.node_id != leader)
    follower.kill9()
    wait_until(lambda: (s := state()) is not None and s[1] == [leader], timeout=30,
               what="the ISR without the killed follower", interval=0.1)  # fmt: skip
    assert produce_error(cluster.node(leader), topic) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_error(cluster.node(leader), topic, acks=1) == ErrorCode.NONE

    follower.restart(clean=False)
    wait_until(lambda: (s := state()) is not None and s[1] == [4, 5], timeout=30,
               what="the follower back in the ISR", interval=0.1)  # fmt: skip
    assert ends_equal(brokers, topic, 101)
    assert produce_error(cluster.node(leader), topic) == ErrorCode.NONE


def test_unclean_election_and_the_old_leaders_return(strom_cluster: StartCluster) -> None:
    """unclean.leader.election.enable=true, replication factor 2, split roles: the follower dies
    (the ISR shrinks to the leader), the leader takes more records, then dies too; the follower
    comes back and is elected uncleanly (it lacks those records), reports RECOVERED and serves.
    When the old leader returns it truncates the records only it held and rejoins the ISR."""
    cluster = strom_cluster(controllers=3, brokers=2, overrides=FAST)
    wait_for_leader(cluster)
    topic = "unclean"
    admin = ck.admin(cluster.bootstrap)
    new = ck.NewTopic(topic, num_partitions=1, replication_factor=2,
                      config={"unclean.leader.election.enable": "true",
                              "min.insync.replicas": "1"})  # fmt: skip
    for future in admin.create_topics([new], operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    brokers = cluster.brokers
    for node in brokers:
        wait_for_topics(node, topic)

    def state() -> tuple[int, list[int]] | None:
        for node in brokers:
            if node.alive and (found := partition_state(node, topic)) is not None:
                return found
        return None

    def isr_is(members: list[int]) -> tuple[int, list[int]] | None:
        found = state()
        return found if found is not None and found[0] >= 0 and found[1] == members else None

    leader, _ = wait_until(lambda: isr_is([4, 5]), timeout=30, what="ISR [4, 5]", interval=0.1)
    produce(cluster.bootstrap, topic, list(values(10)))
    wait_until(lambda: ends_equal(brokers, topic, 10), timeout=20,
               what="both replicas end at 10", interval=0.1)  # fmt: skip
    old = cluster.node(leader)
    survivor = next(n for n in brokers if n is not old)
    survivor.kill9()
    wait_until(lambda: isr_is([leader]), timeout=30, what="the ISR without the follower",
               interval=0.1)  # fmt: skip
    for _ in range(3):  # only the leader holds these
        assert produce_error(old, topic) == ErrorCode.NONE
    old.kill9()
    survivor.restart(clean=False)
    wait_until(lambda: isr_is([survivor.node_id]), timeout=30,
               what="the survivor elected uncleanly", interval=0.1)  # fmt: skip
    wait_until(lambda: any("reporting RECOVERED" in line for line in survivor.output),
               timeout=10, what="the unclean leader reporting RECOVERED", interval=0.05)  # fmt: skip
    produce(survivor.bootstrap, topic, list(values(5, 10)))
    assert log_end(survivor, topic) == 15

    old.restart(clean=False)
    wait_until(lambda: isr_is([4, 5]), timeout=30, what="the old leader back in the ISR",
               interval=0.1)  # fmt: skip
    wait_until(lambda: ends_equal(brokers, topic, 15), timeout=20,
               what="both replicas end at 15", interval=0.1)  # fmt: skip
    assert any("diverges from leader" in line for line in old.output), old.tail(50)
    assert consume_all(survivor.bootstrap, topic, 15) == list(values(15))


def replicas_of(node: ClusterNode, topic: str) -> list[int] | None:
    response = _call(node.bootstrap, MetadataRequest(topics=None), 12, MetadataResponse)
    if not isinstance(response, MetadataResponse):
        return None
    for t in response.topics:
        if t.name == topic and t.partitions:
            return sorted(t.partitions[0].replica_nodes)
    return None


def test_a_reassignment_moves_the_data(strom_cluster: StartCluster) -> None:
    """A single-replica partition on node 1 reassigned to nodes 2 and 3: they copy the log from
    node 1, join the ISR through its AlterPartition, which completes the reassignment; node 1
    drops its replica and the data is served from the new replicas."""
    cluster = strom_cluster(combined=3, overrides=FAST)
    wait_for_leader(cluster)
    topic = "moving"
    admin = ck.admin(cluster.bootstrap)
    new = ck.NewTopic(topic, num_partitions=1, replica_assignment=[[1]])
    for future in admin.create_topics([new], operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    for node in cluster.nodes:
        wait_for_topics(node, topic)
    produce(cluster.bootstrap, topic, list(values(100)))

    target = AlterPartitionReassignmentsRequest.ReassignablePartition(0, [2, 3])
    request = AlterPartitionReassignmentsRequest(
        topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(topic, [target])]
    )
    response = _call(cluster.node(1).bootstrap, request, 0, AlterPartitionReassignmentsResponse)
    assert isinstance(response, AlterPartitionReassignmentsResponse)
    assert response.error_code == ErrorCode.NONE
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE

    def moved() -> bool:
        state = partition_state(cluster.node(2), topic)
        return (
            replicas_of(cluster.node(2), topic) == [2, 3]
            and state is not None and state[0] in (2, 3) and state[1] == [2, 3]
        )  # fmt: skip

    wait_until(moved, timeout=30, what="replicas and ISR [2, 3]", interval=0.1)
    survivors = [cluster.node(2), cluster.node(3)]
    wait_until(lambda: ends_equal(survivors, topic, 100), timeout=20,
               what="both new replicas end at 100", interval=0.1)  # fmt: skip
    wait_until(lambda: log_end(cluster.node(1), topic) is None, timeout=20,
               what="node 1 dropped its replica", interval=0.1)  # fmt: skip
    assert consume_all(cluster.bootstrap, topic, 100) == list(values(100))
