"""The nemesis's guard before a power cut (`faults.cut_blockers`), on the states that matter.

The queue test's main-branch failure (seed 3, hard mix): two nodes were killed -9, restarted,
and a power cut came 1.4 s after the second restart, while the metadata still counted both
killed nodes' previous incarnations in every ISR (their new incarnations had not registered
yet). The guard of the time read one Metadata answer saying "full" and cut the power of the
survivor, the one replica the controller could still trust; the partitions came back with
what its disk had kept (docs/replication.md, Results).
"""

from __future__ import annotations

from compat_tests.jepsen.faults import PartitionView, cut_blockers

REPLICAS = frozenset({1, 2, 3})
FULL: dict[int, PartitionView] = dict.fromkeys(range(3), (2, REPLICAS, REPLICAS))
"""What every node's metadata said: each partition led by node 2, every replica in its ISR."""


def test_a_power_cut_waits_for_restarted_nodes_to_register() -> None:
    # nodes 1 and 3 were killed -9 and have restarted ("started"), not yet unfenced: the
    # metadata still holds their previous incarnations in every ISR
    serving = {1: False, 2: True, 3: False}
    views = {1: None, 2: FULL, 3: None}
    assert all(isr == replicas for _, replicas, isr in FULL.values())  # what the old guard read
    why = cut_blockers(serving, views)
    assert len([w for w in why if "not unfenced yet" in w]) == 2, why
    assert any(w.startswith("node 1's current process") for w in why), why
    assert any(w.startswith("node 3's current process") for w in why), why


def test_a_power_cut_waits_until_every_node_sees_every_isr_full() -> None:
    serving = dict.fromkeys((1, 2, 3), True)
    lagging = dict(FULL)
    lagging[1] = (2, REPLICAS, frozenset({2, 3}))  # node 3's view: 1 not back in partition 1's ISR
    why = cut_blockers(serving, {1: FULL, 2: FULL, 3: lagging})
    assert why == ["node 3 sees partition 1 led by 2 with ISR [2, 3] of [1, 2, 3]"]
    assert cut_blockers(serving, {1: FULL, 2: FULL, 3: None}) == [
        "node 3 answered no metadata for the topic"
    ]
    offline = {**FULL, 0: (-1, REPLICAS, REPLICAS)}
    assert cut_blockers(serving, {1: offline, 2: FULL, 3: FULL}) == [
        "node 1 sees partition 0 led by -1 with ISR [1, 2, 3] of [1, 2, 3]"
    ]


def test_a_power_cut_may_come_once_every_node_is_serving_and_sees_every_isr_full() -> None:
    serving = dict.fromkeys((1, 2, 3), True)
    assert cut_blockers(serving, {1: FULL, 2: FULL, 3: FULL}) == []
