"""The fault schedule: which faults, when, for how long, all drawn from one seed.

A schedule is a list of `Fault`s planned before the run from `random.Random(seed)`, so the
same seed plans the same faults. Which node a fault hits depends on the cluster at that moment
(who leads partition P, who is the active controller), so `pick` (a number in [0, 1) from the
same seed) chooses among the candidates the cluster offers then, and the run log prints the
node each fault actually hit (`faults.py` injects them).

Kinds (`faults.py` says exactly what each does):

| kind | what |
|---|---|
| kill-leader, kill-controller | kill -9 of partition P's leader / the active controller, restarted after the hold |
| pause | SIGSTOP of a node, SIGCONT after the hold |
| isolate, isolate-leader | a node (partition P's leader) cut off from the others, both ways |
| one-way-out, one-way-in | a node's bytes to the others are dropped / the others' bytes to it are |
| bridge | two nodes cut off from each other, both still reach the third |
| isolate-replication | a node's broker links cut (replica fetches), its controller links kept: the ISR shrinks but nothing is fenced |
| power-cut, power-cut-leader | kill -9 of a node (partition P's leader) and what a power loss does to its disk: what it had not fsynced is lost, its last write maybe torn; restarted after the hold |
| kill-all | kill -9 of every node at once (page caches kept), all restarted after the hold |
| power-cut-all | every node's power cut at once |
| pause-leader | SIGSTOP of partition P's leader, SIGCONT after the hold |
| kill-coordinator, pause-coordinator | kill -9 / SIGSTOP of the transaction coordinator (the leader of `__transaction_state` partition 0; the transactional workload gives that topic one partition) |

A fault may come with a second one at the same time on another node (`also`): two faults
at once. Holds are short (2-5 s) or, for the kinds that a timeout can act on (pauses and
network faults), often *long*: longer than `broker.session.timeout.ms` and
`replica.lag.time.max.ms` of the cluster, so that fencing, ISR shrinks, leader changes and a
zombie leader's return happen in every long run.

Mixes: "classic" (the first five kinds, short holds, one at a time: the queue test's original
schedule) and "hard" (everything above; power-cut-all only when `whole_cluster_power_cuts`,
since without flush.messages=1 a whole-cluster power cut loses acknowledged records by design).
The transactional workload's mix, "txn", is kill -9 and SIGSTOP of partition leaders and of the
transaction coordinator (the pauses long in 40% of cases), 15% of them with a second fault of
that mix on another node at the same time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

Kind = Literal[
    "kill-leader", "kill-controller", "pause", "isolate", "isolate-leader",
    "one-way-out", "one-way-in", "bridge", "isolate-replication",
    "power-cut", "power-cut-leader", "kill-all", "power-cut-all",
    "pause-leader", "kill-coordinator", "pause-coordinator",
]  # fmt: skip
Mix = Literal["classic", "hard", "txn"]
CLASSIC: tuple[Kind, ...] = ("kill-leader", "kill-controller", "pause", "isolate", "isolate-leader")
LEADER_KINDS = frozenset({"kill-leader", "isolate-leader", "power-cut-leader", "pause-leader"})
COORDINATOR_KINDS = frozenset({"kill-coordinator", "pause-coordinator"})
PAUSE_KINDS = frozenset({"pause", "pause-leader", "pause-coordinator"})
LONG_KINDS = frozenset(
    {"pause", "isolate", "isolate-leader", "one-way-out", "one-way-in", "bridge",
     "isolate-replication", "pause-leader", "pause-coordinator"}
)  # fmt: skip
"""Kinds whose hold may outlast the cluster's timeouts (a node that is gone for good restarts)."""
POWER_KINDS = frozenset({"power-cut", "power-cut-leader", "power-cut-all"})
WHOLE_CLUSTER = frozenset({"kill-all", "power-cut-all"})
DOUBLE_WITH: tuple[Kind, ...] = (
    "kill-leader", "pause", "isolate", "one-way-in", "one-way-out", "isolate-replication",
)  # fmt: skip
"""What a second fault at the same time may be (never a power cut: one node's disk at a time)."""
HARD_WEIGHTS: dict[Kind, float] = {
    "kill-leader": 2, "kill-controller": 2, "pause": 2, "isolate": 2, "isolate-leader": 2,
    "one-way-out": 1, "one-way-in": 1, "bridge": 1, "isolate-replication": 1.5,
    "power-cut": 1.5, "power-cut-leader": 1.5, "kill-all": 0.6, "power-cut-all": 0.6,
}  # fmt: skip
TXN_WEIGHTS: dict[Kind, float] = {
    "kill-leader": 2, "pause-leader": 2, "kill-coordinator": 2, "pause-coordinator": 2,
}  # fmt: skip
"""The transactional workload's mix: its `also` is drawn from the same kinds."""
DOUBLE_SHARE = 0.15
"""Of the hard mix's single-node faults, the share that come with a second one."""


@dataclass(frozen=True)
class Fault:
    start: float
    """Seconds after the load began."""
    kind: Kind
    hold: float
    """Seconds the fault lasts before it is healed."""
    pick: float
    """Chooses the victim among the candidates at injection time (index = int(pick * n))."""
    partition: int
    """The *-leader kinds: whose leader to hit."""
    also: Kind | None = None
    """A second fault at the same time, on another node."""
    also_pick: float = 0.0

    @property
    def long(self) -> bool:
        return self.hold > 10

    def describe(self) -> str:
        what = (
            f"{self.kind} of partition {self.partition}'s leader"
            if self.kind in LEADER_KINDS
            else self.kind
        )
        if self.kind in COORDINATOR_KINDS:
            what = f"{self.kind} (the transaction coordinator)"
        if self.also is not None:
            what += f" + {self.also}"
        return (
            f"t+{self.start:5.1f}s {what}, healed after {self.hold:.1f}s"
            f"{' (long)' if self.long else ''} (pick {self.pick:.3f})"
        )


def schedule(
    seed: int,
    faults: int,
    partitions: int,
    *,
    mix: Mix = "classic",
    warmup: float = 3.0,
    hold: tuple[float, float] = (2.0, 5.0),
    long_hold: tuple[float, float] = (13.0, 17.0),
    long_share: float = 0.4,
    gap: tuple[float, float] = (2.0, 4.0),
    whole_cluster_power_cuts: bool = False,
) -> list[Fault]:
    """`faults` faults, the first after `warmup` seconds, each held for a time in `hold` (or
    `long_hold`, for a `long_share` of the long kinds of the hard mix) and followed by a quiet
    time in `gap` (times exclude how long the heal itself takes)."""
    rng = random.Random(seed)
    out: list[Fault] = []
    at = warmup
    if mix == "classic":
        for _ in range(faults):
            kind = CLASSIC[rng.randrange(len(CLASSIC))]
            held = round(rng.uniform(*hold), 1)
            out.append(Fault(at, kind, held, round(rng.random(), 3), rng.randrange(partitions)))
            at += held + round(rng.uniform(*gap), 1)
        return out
    if mix == "txn":
        weights, doubles = TXN_WEIGHTS, tuple(TXN_WEIGHTS)
    else:
        weights = {k: w for k, w in HARD_WEIGHTS.items() if whole_cluster_power_cuts or k != "power-cut-all"}
        doubles = DOUBLE_WITH
    kinds = list(weights)
    for _ in range(faults):
        kind = rng.choices(kinds, [weights[k] for k in kinds])[0]
        long = kind in LONG_KINDS and rng.random() < long_share
        held = round(rng.uniform(*(long_hold if long else hold)), 1)
        also: Kind | None = None
        if kind not in WHOLE_CLUSTER and kind != "bridge" and rng.random() < DOUBLE_SHARE:
            also = doubles[rng.randrange(len(doubles))]
        pick, partition = round(rng.random(), 3), rng.randrange(partitions)
        out.append(Fault(at, kind, held, pick, partition, also, round(rng.random(), 3)))
        at += held + round(rng.uniform(*gap), 1)
    return out


def choose(pick: float, candidates: list[int]) -> int:
    """The victim among `candidates` (sorted node ids) that `pick` names."""
    ordered = sorted(candidates)
    return ordered[min(len(ordered) - 1, int(pick * len(ordered)))]
