"""The fault schedule: which faults, when, for how long, all drawn from one seed.

A schedule is a list of `Fault`s planned before the run from `random.Random(seed)`, so the
same seed plans the same faults. Which node a fault hits depends on the cluster at that moment
(who leads partition 2, who is the active controller), so `pick` (a number in [0, 1) from the
same seed) chooses among the candidates the cluster offers then, and the run log prints the
node each fault actually hit.

One fault is active at a time and each is healed (restart of a killed node, SIGCONT of a paused
one) before the next begins: with one of three nodes down both the controller quorum (2 of 3)
and min.insync.replicas=2 can still make progress, so every stretch of the run should accept
writes once leadership has moved.

Network partitions (`ClusterProcess(partitionable=True)`, proxies in front of every node
listener, `strom.broker.testing.network`): "isolate" cuts a node off from the other two,
"isolate-leader" cuts off partition P's leader (a leader that may still take writes from the
test's clients, which reach every node, while the others elect a new one). Every link between
nodes is cut (Raft, heartbeats, replica fetches); the test's clients are never cut.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

Kind = Literal["kill-leader", "kill-controller", "pause", "isolate", "isolate-leader"]
KINDS: tuple[Kind, ...] = ("kill-leader", "kill-controller", "pause", "isolate", "isolate-leader")


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
    """kill-leader: whose leader to kill."""

    def describe(self) -> str:
        what = (
            f"{self.kind} of partition {self.partition}'s leader"
            if self.kind in ("kill-leader", "isolate-leader")
            else self.kind
        )
        return f"t+{self.start:5.1f}s {what}, healed after {self.hold:.1f}s (pick {self.pick:.3f})"


def schedule(
    seed: int,
    faults: int,
    partitions: int,
    *,
    warmup: float = 3.0,
    hold: tuple[float, float] = (2.0, 5.0),
    gap: tuple[float, float] = (2.0, 4.0),
) -> list[Fault]:
    """`faults` faults, the first after `warmup` seconds, each held for a time in `hold` and
    followed by a quiet time in `gap` (times exclude how long the heal itself takes)."""
    rng = random.Random(seed)
    out: list[Fault] = []
    at = warmup
    for _ in range(faults):
        kind = KINDS[rng.randrange(len(KINDS))]
        held = round(rng.uniform(*hold), 1)
        out.append(Fault(at, kind, held, round(rng.random(), 3), rng.randrange(partitions)))
        at += held + round(rng.uniform(*gap), 1)
    return out


def choose(fault: Fault, candidates: list[int]) -> int:
    """The victim among `candidates` (sorted node ids) that `fault.pick` names."""
    ordered = sorted(candidates)
    return ordered[min(len(ordered) - 1, int(fault.pick * len(ordered)))]
