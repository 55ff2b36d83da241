"""Network partitions of a 3-node combined cluster (`ClusterProcess(partitionable=True)`: every
link between two nodes runs through the harness's proxies, which can hold its bytes; see
`strom.broker.testing.network`). The active controller cut off from the other two: the majority
elects a leader and keeps changing metadata, the cut-off node commits nothing, and after the
heal it follows the new leader and has what was created meanwhile. A node cut off as a broker:
its lease runs out, the active controller fences it, and its partitions have no leader (-1).
Prints the measurements docs/cluster.md ("Measured") quotes.
"""

from __future__ import annotations

import threading
import time

import pytest

from compat_tests.cluster.quorum import (
    QuorumState,
    create_topic_via,
    describe_quorum,
    leader_seen_by,
    partition_leaders,
    quorum_state,
    topics_on,
)
from compat_tests.cluster.test_cluster import ELECTION_TIMEOUT_S, caught_up, wait_for_leader
from compat_tests.helpers import topic_name, wait_until
from strom.broker.testing.cluster import ClusterNode, ClusterProcess
from strom.broker.testing.pytest_plugin import StartCluster
from strom.wire.errors import ErrorCode

SESSION_TIMEOUT_S = 9.0
"""broker.session.timeout.ms's default: a broker unheard of for this long is fenced."""
HEARTBEAT_INTERVAL_S = 2.0
"""broker.heartbeat.interval.ms's default: the last heartbeat before a cut is up to this old."""


def new_leader_among(nodes: list[ClusterNode], old: QuorumState) -> QuorumState | None:
    state = leader_seen_by(nodes)
    if state is None or state.leader_id == old.leader_id or state.leader_epoch <= old.leader_epoch:
        return None
    return state


def leads(node: ClusterNode) -> bool:
    """Whether the node answers DescribeQuorum as the leader (no answer: it does not)."""
    answer = describe_quorum(node)
    return answer is not None and answer.error_code == ErrorCode.NONE


def test_partition_of_the_active_controller(strom_cluster: StartCluster) -> None:
    cluster = strom_cluster(combined=3, partitionable=True)
    before = wait_for_leader(cluster)
    old = cluster.node(before.leader_id)
    majority = [n for n in cluster.nodes if n is not old]

    # Sent to the leader the moment it is cut off, while it still leads: it appends the record
    # but no majority can acknowledge it, so it must not answer success.
    early: list[int | None] = []
    doomed_early = topic_name("isolated-leader")
    sender = threading.Thread(
        target=lambda: early.append(create_topic_via(old, doomed_early, timeout_ms=5000))
    )
    cut_at = time.monotonic()
    cluster.partition(old)
    sender.start()
    after = wait_until(lambda: new_leader_among(majority, before), timeout=10 * ELECTION_TIMEOUT_S + 5,
                       what="a new leader on the majority side", interval=0.02)  # fmt: skip
    election = time.monotonic() - cut_at
    print(f"\npartition of leader {old.node_id} (epoch {before.leader_epoch}): node "
          f"{after.leader_id} leads epoch {after.leader_epoch} after {election:.2f}s")  # fmt: skip
    assert after.leader_id != old.node_id
    # Check-quorum: a leader that no majority has fetched from for fetch.timeout.ms resigns.
    wait_until(lambda: not leads(old), timeout=10 * ELECTION_TIMEOUT_S,
               what=f"the cut-off node {old.node_id} resigned", interval=0.02)  # fmt: skip
    print(f"the cut-off node {old.node_id} no longer claims to lead after "
          f"{time.monotonic() - cut_at:.2f}s")  # fmt: skip
    assert election < 2 * ELECTION_TIMEOUT_S + 6 * ELECTION_TIMEOUT_S  # fetch timeout + a few rounds

    # Metadata changes go on through the majority, through either of its nodes.
    created = []
    for via in majority:
        topic = topic_name(f"majority{via.node_id}")
        assert create_topic_via(via, topic) == ErrorCode.NONE
        created.append(topic)
    for node in majority:
        wait_until(lambda node=node: set(created) <= topics_on(node), timeout=15,  # type: ignore[misc]
                   what=f"{created} on node {node.node_id}")  # fmt: skip

    # The cut-off node cannot commit: the answer is an error or nothing, never success.
    sender.join()
    doomed = topic_name("isolated")
    answer = create_topic_via(old, doomed, timeout_ms=3000)
    print(f"CreateTopics sent to the cut-off leader at the cut: {_named(early[0])}; to the "
          f"cut-off node {old.node_id} after the election: {_named(answer)}")  # fmt: skip
    assert early[0] != ErrorCode.NONE
    assert answer != ErrorCode.NONE
    assert not {doomed, doomed_early} & topics_on(old)

    healed_at = time.monotonic()
    cluster.heal()
    wait_until(lambda: set(created) <= topics_on(old), timeout=30,
               what=f"the healed node {old.node_id} has {created}")  # fmt: skip
    state = wait_until(lambda: caught_up(cluster, old.node_id), timeout=30,
                       what=f"node {old.node_id} caught up with the leader", interval=0.1)  # fmt: skip
    print(f"after the heal node {old.node_id} caught up in {time.monotonic() - healed_at:.2f}s "
          f"(leader {state.leader_id}, epoch {state.leader_epoch})")  # fmt: skip
    assert state.leader_epoch >= after.leader_epoch
    assert old.node_id in state.voters
    for node in cluster.nodes:  # the old leader's uncommitted record was truncated away
        assert not {doomed, doomed_early} & topics_on(node)


def _named(code: int | None) -> str:
    return "no answer in time" if code is None else ErrorCode(code).name


@pytest.mark.parametrize("layout", ["combined", "split"])
def test_partition_of_a_broker_fences_it(strom_cluster: StartCluster, layout: str) -> None:
    """combined: a follower voter (also a broker) cut off; split: broker-only node 4 of
    controllers 1-3 and brokers 4-5 cut off. Either way the active controller stops hearing its
    heartbeats and fences it when its lease runs out."""
    if layout == "combined":
        cluster = strom_cluster(combined=3, partitionable=True)
        before = wait_for_leader(cluster)
        cut_off = next(n for n in cluster.nodes if n.node_id != before.leader_id)
    else:
        cluster = strom_cluster(controllers=3, brokers=2, partitionable=True)
        before = wait_for_leader(cluster)
        cut_off = cluster.node(4)
    other_brokers = [n for n in cluster.brokers if n is not cut_off]
    other_controllers = [n for n in cluster.controllers if n is not cut_off]
    topic = topic_name("single")
    assert create_topic_via(other_brokers[0], topic, replicas=[cut_off.node_id]) == 0
    for node in cluster.brokers:
        wait_until(lambda node=node: partition_leaders(node, topic) == {0: cut_off.node_id},  # type: ignore[misc]
                   timeout=15, what=f"{topic} led by {cut_off.node_id} on {node.node_id}")  # fmt: skip

    cut_at = time.monotonic()
    cluster.partition(cut_off)
    for node in other_brokers:
        wait_until(lambda node=node: partition_leaders(node, topic) == {0: -1},  # type: ignore[misc]
                   timeout=SESSION_TIMEOUT_S + 10,
                   what=f"{topic} leaderless on node {node.node_id}")  # fmt: skip
    fenced = time.monotonic() - cut_at
    state = leader_seen_by(other_controllers)
    print(f"\npartition of {layout} broker {cut_off.node_id}: fenced ({topic} leader -1 on the "
          f"other side) after {fenced:.2f}s; the quorum leader is "
          f"{state.leader_id if state else None}")  # fmt: skip
    # The lease runs from the last heartbeat the controller heard, up to one interval before
    # the cut: fencing earlier than that would be premature.
    assert SESSION_TIMEOUT_S - HEARTBEAT_INTERVAL_S - 0.2 < fenced < SESSION_TIMEOUT_S + 10
    assert state is not None
    assert state.leader_id != cut_off.node_id
    # The cut-off node forwards to an active controller it cannot reach: it times out. Whether
    # the topic comes to exist is open (the forward is held, and may arrive after the heal, as
    # after a real partition), so only the answer is checked.
    stranded = topic_name("stranded")
    answer = create_topic_via(cut_off, stranded, timeout_ms=3000)
    print(f"CreateTopics sent to the cut-off node: {_named(answer)}")
    assert answer != ErrorCode.NONE

    healed_at = time.monotonic()
    cluster.heal()
    for node in cluster.brokers:
        wait_until(lambda node=node: partition_leaders(node, topic) == {0: cut_off.node_id},  # type: ignore[misc]
                   timeout=30, what=f"{topic} led by {cut_off.node_id} again on {node.node_id}")  # fmt: skip
    back = time.monotonic() - healed_at
    after = wait_until(lambda: caught_up_any(cluster, cut_off.node_id), timeout=30,
                       what=f"node {cut_off.node_id} caught up", interval=0.1)  # fmt: skip
    print(f"after the heal node {cut_off.node_id} leads {topic} again in {back:.2f}s; quorum "
          f"leader {after.leader_id} epoch {after.leader_epoch} (before the cut: "
          f"{before.leader_id} epoch {before.leader_epoch})")  # fmt: skip
    print(f"{stranded} after the heal: "
          f"{'created' if stranded in topics_on(other_brokers[0]) else 'never created'}")
    # Pre-vote (KIP-996): a cut-off voter's elections never won a pre-vote, so they bumped no
    # epoch, and its return does not unseat the leader.
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)


def caught_up_any(cluster: ClusterProcess, node_id: int) -> QuorumState | None:
    """The quorum once the node (voter or observer) has reached the leader's high watermark."""
    state = quorum_state(cluster)
    if state is None:
        return None
    end = state.voters.get(node_id, state.observers.get(node_id, -1))
    return state if end >= state.high_watermark else None
