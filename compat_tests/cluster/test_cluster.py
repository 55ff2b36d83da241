"""A 3-node combined cluster (every node `process.roles=broker,controller`, a static quorum of
3 voters) of `strom serve` children, with stock clients: it starts, elects a leader, serves
topics from every node, survives `kill -9` of the active controller, and the killed node catches
up after a restart. Prints the measurements docs/cluster.md ("Measured") quotes.
"""

from __future__ import annotations

import threading
import time

import trio
from confluent_kafka import TopicPartition

from compat_tests.cluster.quorum import QuorumState, describe_quorum, quorum_state, topics_on
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import now_ms, sample_records, topic_name, wait_until
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.errors import ErrorCode
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse

ELECTION_TIMEOUT_S = 1.0
"""controller.quorum.election.timeout.ms's default; fetch.timeout.ms (how long followers go
without a Fetch answer before they call an election) is twice it."""


def settled(cluster: ClusterProcess, *, voters: int = 3) -> QuorumState | None:
    """The quorum once a leader reports every voter."""
    state = quorum_state(cluster)
    if state is None or len(state.voters) != voters:
        return None
    return state


def new_leader(cluster: ClusterProcess, old: QuorumState) -> QuorumState | None:
    """The quorum once a live node other than `old`'s leader leads."""
    state = quorum_state(cluster)
    if state is None or state.leader_id == old.leader_id:
        return None
    return state


def caught_up(cluster: ClusterProcess, node_id: int) -> QuorumState | None:
    """The quorum once the voter's log end has reached the leader's high watermark."""
    state = quorum_state(cluster)
    if state is None or state.voters.get(node_id, -1) < state.high_watermark:
        return None
    return state


def wait_for_leader(cluster: ClusterProcess, timeout: float = 30) -> QuorumState:
    """Until a live leader reports 3 voters."""
    return wait_until(lambda: settled(cluster), timeout=timeout, what="a leader with 3 voters",
                      interval=0.1)  # fmt: skip


def wait_for_topics(node: ClusterNode, *topics: str, timeout: float = 15) -> None:
    """Until this one node's Metadata lists every topic."""
    wait_until(lambda: set(topics) <= topics_on(node), timeout=timeout,
               what=f"{', '.join(topics)} in node {node.node_id}'s Metadata")  # fmt: skip


def test_three_combined_nodes_elect_a_leader(strom_cluster: StartCluster) -> None:
    begun = time.monotonic()
    cluster = strom_cluster(combined=3)
    state = wait_for_leader(cluster)
    elected = time.monotonic() - begun
    print(f"\n3-node combined cluster: formatted in {cluster.format_seconds:.2f}s; from the "
          f"first node's start: every node started {cluster.startup_seconds:.2f}s, every broker "
          f"in every broker's Metadata {cluster.ready_seconds:.2f}s; {elected:.2f}s in all "
          "(with formatting) to a leader reporting 3 voters")  # fmt: skip
    assert sorted(state.voters) == [1, 2, 3]
    assert state.leader_id in (1, 2, 3)
    assert state.leader_epoch >= 1
    for node in cluster.nodes:  # a follower answers NOT_LEADER_OR_FOLLOWER (the tool asks again)
        answer = describe_quorum(node)
        assert answer is not None
        if node.node_id != state.leader_id:
            assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_topic_is_in_every_nodes_metadata_and_serves_data(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3)
    wait_for_leader(cluster)
    topic = topic_name("data")
    ck.create_topic(ck.admin(cluster.bootstrap), topic, 3)
    for node in cluster.nodes:
        wait_for_topics(node, topic)
    records = sample_records(3, 20, base_ts=now_ms())
    ck.produce_all(ck.producer(cluster.bootstrap), topic, records)
    consumer = ck.consumer(cluster.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        assert sorted(ck.consume(consumer, len(records))) == sorted(records)
    finally:
        consumer.close()


def test_a_topic_created_through_any_node_is_in_every_nodes_metadata(
    strom_cluster: StartCluster,
) -> None:
    cluster = strom_cluster(combined=3)
    state = wait_for_leader(cluster)
    others = [n for n in cluster.nodes if n.node_id != state.leader_id]
    for via in [*others, cluster.node(state.leader_id)]:  # forwarded, then the controller's own
        topic = topic_name(f"via{via.node_id}")
        ck.create_topic(ck.admin(via.bootstrap), topic, 3)
        for node in cluster.nodes:
            wait_for_topics(node, topic)


def test_kill9_of_the_active_controller(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3)
    before = wait_for_leader(cluster)
    first = topic_name("before")
    ck.create_topic(ck.admin(cluster.bootstrap), first, 2)

    victim = cluster.node(before.leader_id)
    killed_at = time.monotonic()
    victim.kill9()

    after = wait_until(lambda: new_leader(cluster, before), timeout=10 * ELECTION_TIMEOUT_S + 5, what="a new leader",
                       interval=0.02)  # fmt: skip
    election = time.monotonic() - killed_at
    print(f"\nkill -9 of leader {before.leader_id} (epoch {before.leader_epoch}): node "
          f"{after.leader_id} leads epoch {after.leader_epoch} after {election:.2f}s")  # fmt: skip
    assert after.leader_epoch > before.leader_epoch
    assert election < 2 * ELECTION_TIMEOUT_S + 6 * ELECTION_TIMEOUT_S  # fetch timeout + a few rounds

    survivors = [n for n in cluster.nodes if n is not victim]
    second = topic_name("after")
    ck.create_topic(ck.admin(",".join(n.bootstrap for n in survivors)), second, 2)
    for node in survivors:
        wait_for_topics(node, second)

    restarted_at = time.monotonic()
    victim.restart(clean=False)
    wait_for_topics(victim, first, second, timeout=30)

    wait_until(lambda: caught_up(cluster, victim.node_id), timeout=30, what=f"node {victim.node_id} caught up with the leader",
               interval=0.1)  # fmt: skip
    print(f"restarted node {victim.node_id} caught up in {time.monotonic() - restarted_at:.2f}s")


def test_three_controllers_and_two_brokers(strom_cluster: StartCluster) -> None:
    """Split roles: controller-only voters 1-3, broker-only nodes 4 and 5 (observers of the
    metadata log, registered with the active controller)."""
    cluster = strom_cluster(controllers=3, brokers=2)
    state = wait_for_leader(cluster)
    assert sorted(state.voters) == [1, 2, 3]
    assert state.leader_id in (1, 2, 3)
    wait_until(lambda: (s := quorum_state(cluster)) is not None and sorted(s.observers) == [4, 5],
               timeout=30, what="brokers 4 and 5 as observers", interval=0.1)  # fmt: skip
    assert cluster.bootstrap == f"{cluster.node(4).bootstrap},{cluster.node(5).bootstrap}"
    md = ck.admin(cluster.bootstrap).list_topics(timeout=10)
    assert sorted(md.brokers) == [4, 5]


def test_paused_leader_and_clean_stop_of_the_leader(strom_cluster: StartCluster) -> None:
    """SIGSTOP of the leader (a long pause: it keeps its connections but answers nothing) elects
    another; after SIGCONT it rejoins as a follower and catches up. SIGTERM of the leader
    resigns leadership first, so the next leader is there sooner than after a crash."""
    cluster = strom_cluster(combined=3)
    first = wait_for_leader(cluster)
    paused = cluster.node(first.leader_id)
    paused.pause()
    try:
        second = wait_until(lambda: new_leader(cluster, first), timeout=15,
                            what="a leader other than the paused one", interval=0.05)  # fmt: skip
    finally:
        paused.resume()
    assert second.leader_epoch > first.leader_epoch
    wait_until(lambda: caught_up(cluster, paused.node_id), timeout=30,
               what=f"the resumed node {paused.node_id} caught up", interval=0.1)  # fmt: skip

    leader = cluster.node(second.leader_id)
    stopped_at = time.monotonic()
    assert leader.stop() == 0
    stop_took = time.monotonic() - stopped_at
    third = wait_until(lambda: new_leader(cluster, second), timeout=15,
                       what="a leader after the clean stop", interval=0.02)  # fmt: skip
    print(f"\nSIGTERM of leader {second.leader_id}: node {third.leader_id} leads epoch "
          f"{third.leader_epoch} {time.monotonic() - stopped_at:.2f}s after the signal (the "
          f"process took {stop_took:.2f}s to exit)")  # fmt: skip
    topic = topic_name("after-stop")
    ck.create_topic(ck.admin(",".join(n.bootstrap for n in cluster.nodes if n is not leader)),
                    topic, 1)  # fmt: skip
    leader.restart()
    wait_for_topics(leader, topic, timeout=30)


def test_a_restarted_node_answers_clients_only_once_it_is_unfenced(
    strom_cluster: StartCluster,
) -> None:
    """Kafka's broker enables request processing only once it is unfenced. Node 1 restarted
    without a quorum cannot catch up: a Metadata request sent to it then is answered only after
    the other voters are back, and lists the topic and node 1 itself. (Answered at once from
    the restarted node's empty image, it listed no broker and said the topic did not exist:
    librdkafka then dropped every broker and took the topic's partitions off their brokers.)"""
    cluster = strom_cluster(combined=3)
    wait_for_leader(cluster)
    topic = topic_name("restart")
    ck.create_topic(ck.admin(cluster.bootstrap), topic, 3)
    for node in cluster.nodes:
        wait_for_topics(node, topic)
    for node in cluster.nodes:
        node.kill9()
    first = cluster.node(1)
    first.start()
    first.wait_started()  # alone: no quorum, so it cannot be unfenced

    answers: list[MetadataResponse | BaseException] = []

    async def ask() -> None:
        with trio.fail_after(60):
            client = await KafkaClient.connect(first.bootstrap)
            try:
                answers.append(
                    await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
                )
            finally:
                await client.aclose()

    def run() -> None:
        try:
            trio.run(ask)
        except BaseException as exc:  # reported by the assertion below
            answers.append(exc)

    asking = threading.Thread(target=run, daemon=True)
    asking.start()
    for node in cluster.nodes[1:]:
        node.start()
    for node in cluster.nodes[1:]:
        node.wait_started()
    asking.join(90)
    [answer] = answers
    assert isinstance(answer, MetadataResponse), answer
    brokers = {b.node_id for b in answer.brokers}
    topics = {t.name for t in answer.topics if t.error_code == ErrorCode.NONE}
    assert 1 in brokers, brokers
    assert topic in topics, topics
