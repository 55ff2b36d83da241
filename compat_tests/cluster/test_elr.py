"""Eligible leader replicas (KIP-966) with real processes: one controller and three brokers
formatted with `--feature eligible.leader.replicas.version=1`, a topic with replication factor
3 and min.insync.replicas=2, stock clients (confluent-kafka) producing acks=all.

Two followers stop one after another (SIGTERM: a clean shutdown whose marker names the broker
epoch), so the ISR shrinks to the leader alone with the second follower in the ELR; the leader
is then killed (-9) and its lease runs out: ISR empty, ELR both. The second follower, started
again, leads from the ELR: a clean election (the killed leader stays in the ELR, which an
unclean election would have emptied) that loses no acknowledged record. (The first follower is
started in between only to be asked, and stopped again before the election so that it cannot
join the ISR before the check; started once more afterwards, it catches up and joins the ISR,
which lets the new leader's high watermark move again: strict min ISR.) DescribeTopicPartitions
shows what `kafka-topics --describe` prints as "Elr:" and "LastKnownElr:".
"""

from __future__ import annotations

import re

from compat_tests.cluster.test_cluster import wait_for_topics
from compat_tests.cluster.test_replication import (
    FAST,
    _call,
    consume_all,
    ends_equal,
    log_end,
    produce,
    produce_error,
    values,
)
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import wait_until
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.cluster import ClusterNode
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)

Described = tuple[int, list[int], list[int], list[int]]


def described(node: ClusterNode, topic: str) -> Described | None:
    """(leader, ISR, ELR, last known ELR) of partition 0 in this broker's DescribeTopicPartitions."""
    request = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(topic)]
    )
    response = _call(node.bootstrap, request, 0, DescribeTopicPartitionsResponse)
    if not isinstance(response, DescribeTopicPartitionsResponse) or not response.topics:
        return None
    [found] = response.topics
    if found.error_code != ErrorCode.NONE or not found.partitions:
        return None
    p = found.partitions[0]
    return (
        p.leader_id,
        sorted(p.isr_nodes),
        sorted(p.eligible_leader_replicas or []),
        sorted(p.last_known_elr or []),
    )


def until(node: ClusterNode, topic: str, wanted: Described) -> None:
    wait_until(lambda: described(node, topic) == wanted, timeout=40, interval=0.1,
               what=f"{topic} at node {node.node_id}: leader, ISR, ELR, last known ELR = "
                    f"{wanted} (last seen {described(node, topic)})")  # fmt: skip


def test_an_elr_member_leads_after_the_last_isr_member_dies(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(
        controllers=1, brokers=3, overrides=FAST,
        features={"eligible.leader.replicas.version": 1},
    )  # fmt: skip
    leader, first, second = (cluster.node(i) for i in (2, 3, 4))
    topic = "elr"
    admin = ck.admin(cluster.bootstrap)
    new = ck.NewTopic(topic, num_partitions=1, replica_assignment=[[2, 3, 4]],
                      config={"min.insync.replicas": "2"})  # fmt: skip
    for future in admin.create_topics([new], operation_timeout=30, request_timeout=30).values():
        future.result(timeout=30)
    for node in cluster.brokers:
        wait_for_topics(node, topic)
    until(leader, topic, (2, [2, 3, 4], [], []))

    acked = list(values(100))
    produce(cluster.bootstrap, topic, acked)
    wait_until(lambda: ends_equal(cluster.brokers, topic, 100), timeout=20,
               what="every replica's log ends at 100", interval=0.1)  # fmt: skip

    first.stop()  # ISR 3 -> 2: still at min.insync.replicas, no ELR
    until(leader, topic, (2, [2, 4], [], []))
    more = list(values(100, 100))
    produce(f"{leader.bootstrap},{second.bootstrap}", topic, more)
    acked += more
    wait_until(lambda: ends_equal([leader, second], topic, 200), timeout=20,
               what="the leader's and the second follower's logs end at 200", interval=0.1)  # fmt: skip

    second.stop()  # ISR 2 -> 1: below min.insync.replicas, the leaver joins the ELR
    until(leader, topic, (2, [2], [4], []))
    assert produce_error(leader, topic) == ErrorCode.NOT_ENOUGH_REPLICAS

    leader.kill9()  # the last ISR member; fenced once its lease runs out
    first.start()  # a broker to ask (not in the ISR or ELR: it cannot lead)
    first.wait_started()
    until(first, topic, (-1, [], [2, 4], [2]))
    out = KafkaTools.for_tests().run("kafka-topics", "--bootstrap-server", first.bootstrap,
                                     "--describe", "--topic", topic)  # fmt: skip
    assert re.search(
        r"Leader: none\tReplicas: 2,3,4\tIsr: \tElr: 2,4\tLastKnownElr: 2", out.stdout
    ), out.describe()

    first.stop()  # so that nothing joins the ISR before the check below

    second.start()  # its clean-shutdown marker matches: it stays in the ELR and leads
    second.wait_started()
    until(second, topic, (4, [4], [2], []))  # 2 still in the ELR: a clean election
    assert log_end(second, topic) == 200  # every acknowledged record is there
    # Strict min ISR: the new leader's high watermark waits for a second in-sync replica.
    first.start()
    first.wait_started()
    until(second, topic, (4, [3, 4], [], []))  # back at min.insync.replicas: ELR cleared
    assert consume_all(f"{first.bootstrap},{second.bootstrap}", topic, 200) == acked
