"""Seeded simulations of transactional producers against the coordinator state machine.

Producers (several per transactional id, so zombies exist) begin transactions, add
partitions, commit and abort, while the harness delays and fails `__transaction_state` writes,
fails markers, lets transactions time out and fails the coordinator over (a new one loads the
log; a write in flight when it died may or may not have reached the log). Checked:

- every parked request is answered exactly once;
- atomicity: one transaction's markers carry one outcome on every partition;
- a commit acknowledged to its producer reaches every partition it added;
- a fenced producer is never told its partitions were added or its commit succeeded;
- once faults stop, nothing stays pending and no transaction stays open past its timeout.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from strom.coordinator.transactions.txn_api import EndResult, InitResult, NeedProducerId
from strom.coordinator.transactions.txn_metadata import TopicPartition, TxnState
from strom.wire.errors import ErrorCode
from tests.transactions.txn_sim import TxnSim

PARTITIONS: list[TopicPartition] = [("t", p) for p in range(4)]
TIMEOUT_MS = 3_000


@dataclass
class Producer:
    txn_id: str
    pid: int = -1
    epoch: int = -1
    added: set[TopicPartition] = field(default_factory=set)
    waiting: tuple[str, int, object] | None = None
    """(what, token, detail) of a request parked in the coordinator."""
    ending: bool | None = None
    """An EndTxn (commit?) that failed retriably: real clients send it again before anything
    else, and so do these."""


@dataclass
class World:
    sim: TxnSim
    rng: random.Random
    tv: int
    producers: list[Producer]
    latest_epoch: dict[str, tuple[int, int]] = field(default_factory=dict)
    """txn id -> (pid, epoch) of the newest successful InitProducerId."""
    committed: list[tuple[str, int, int, frozenset[TopicPartition]]] = field(default_factory=list)
    """(txn id, pid, epoch, partitions) of every commit acknowledged to a producer."""
    answered: int = 0
    seen: int = 0
    handed_out: set[tuple[int, int]] = field(default_factory=set)

    # --- one step of one producer ----------------------------------------------------------

    def collect(self) -> None:
        """Apply the answers released since the last call, in the order they were released."""
        replies = list(self.sim.replies.items())
        waiting = {p.waiting[1]: p for p in self.producers if p.waiting is not None}
        for token, result in replies[self.seen :]:
            p = waiting.get(token)
            if p is not None and p.waiting is not None:
                what, _, detail = p.waiting
                p.waiting = None
                self.answered += 1
                self.apply(p, what, result, detail)
        self.seen = len(replies)

    def step(self, p: Producer) -> None:
        sim = self.sim
        self.collect()
        if p.waiting is not None:
            return
        token = next(sim._tokens)
        outcome: object
        if p.pid < 0 or (p.ending is None and self.rng.random() < 0.03):
            outcome = sim.machine.init_producer_id(sim.now, p.txn_id, TIMEOUT_MS, None, token)
            if isinstance(outcome, NeedProducerId):
                outcome = sim.machine.init_producer_id(
                    sim.now, p.txn_id, TIMEOUT_MS, None, token, next(sim._pids)
                )
            self.park_or_apply(p, "init", token, outcome, None)
        elif p.ending is None and (not p.added or self.rng.random() < 0.6):
            tp = self.rng.choice(PARTITIONS)
            outcome = sim.machine.add_partitions(
                sim.now, p.txn_id, p.pid, p.epoch, [tp], token, self.tv
            )
            self.park_or_apply(p, "add", token, outcome, (tp, (p.pid, p.epoch)))
        else:
            commit = self.rng.random() < 0.7 if p.ending is None else p.ending
            outcome = sim.machine.end_txn(sim.now, p.txn_id, p.pid, p.epoch, commit, self.tv, token)
            if isinstance(outcome, NeedProducerId):
                outcome = sim.machine.end_txn(
                    sim.now, p.txn_id, p.pid, p.epoch, commit, self.tv, token, next(sim._pids)
                )
            detail = (commit, p.pid, p.epoch, frozenset(p.added))
            self.park_or_apply(p, "end", token, outcome, detail)

    def park_or_apply(
        self, p: Producer, what: str, token: int, outcome: object, detail: object
    ) -> None:
        if outcome is None:
            p.waiting = (what, token, detail)
        else:
            self.answered += 1
            self.apply(p, what, outcome, detail)

    def apply(self, p: Producer, what: str, result: object, detail: object) -> None:
        if what == "init":
            assert isinstance(result, InitResult)
            if result.error == ErrorCode.NONE:
                p.pid, p.epoch, p.added, p.ending = (
                    result.producer_id,
                    result.producer_epoch,
                    set(),
                    None,
                )
                assert (p.pid, p.epoch) not in self.handed_out, "an epoch handed out twice"
                self.handed_out.add((p.pid, p.epoch))
                self.latest_epoch[p.txn_id] = (p.pid, p.epoch)
        elif what == "add":
            assert isinstance(result, ErrorCode)
            assert isinstance(detail, tuple)
            tp, (pid, epoch) = detail
            if result == ErrorCode.NONE:
                latest = self.latest_epoch.get(p.txn_id)
                assert latest is None or (pid, epoch) >= latest or pid != latest[0], (
                    f"fenced producer {pid}/{epoch} added {tp} (latest {latest})"
                )
                p.added.add(tp)
            elif result in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
                p.pid = -1
        else:
            assert isinstance(result, EndResult)
            assert isinstance(detail, tuple)
            commit, pid, epoch, added = detail
            p.ending = None
            if result.error == ErrorCode.NONE:
                if commit:
                    self.committed.append((p.txn_id, pid, epoch, added))
                p.added = set()
                if self.tv >= 2:
                    p.pid, p.epoch = result.producer_id, result.producer_epoch
                    self.latest_epoch[p.txn_id] = max(
                        self.latest_epoch.get(p.txn_id, (-1, -1)), (p.pid, p.epoch)
                    )
            elif result.error in (
                ErrorCode.PRODUCER_FENCED,
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                ErrorCode.INVALID_TXN_STATE,
            ):
                p.pid = -1
            else:
                p.ending = commit

    # --- faults -------------------------------------------------------------------------------

    def fault(self) -> None:
        sim, rng = self.sim, self.rng
        roll = rng.random()
        if roll < 0.05:
            sim.hold = not sim.hold
        elif roll < 0.08:
            sim.fail = rng.choice([ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT])
        elif roll < 0.14:
            sim.fail = ErrorCode.NONE
        elif roll < 0.17:
            tp = rng.choice(PARTITIONS)
            sim.marker_errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif roll < 0.22:
            sim.marker_errors.clear()
        elif roll < 0.24:
            self.fail_over()
        elif roll < 0.30:
            sim.machine.abort_timed_out(sim.now)

    def fail_over(self) -> None:
        """The coordinator dies: writes handed out may or may not be in the log."""
        sim = self.sim
        for write in sim.held:
            if self.rng.random() < 0.5:
                sim.log.setdefault(write.partition, []).append(write.record)
        sim.held.clear()
        sim.held_markers.clear()
        for partition in range(sim.partitions):
            sim.machine.unload(sim.now, partition)
        sim.settle()  # the parked requests are answered NOT_COORDINATOR
        sim.fail_over()


@pytest.mark.parametrize("tv", [0, 2])
@pytest.mark.parametrize("seed", range(25))
def test_simulation(seed: int, tv: int) -> None:
    rng = random.Random(seed * 10 + tv)
    sim = TxnSim(partitions=2, transaction_version=tv)
    ids = ["a", "b", "c"]
    world = World(sim, rng, tv, [Producer(rng.choice(ids)) for _ in range(6)])
    for _ in range(400):
        world.fault()
        world.step(rng.choice(world.producers))
        sim.advance(rng.choice([0, 0, 10, 100, 500]))
        world.collect()
    # the faults stop; everything still waiting completes
    sim.hold, sim.fail, sim.hold_markers = False, ErrorCode.NONE, False
    sim.marker_errors.clear()
    for _ in range(20):
        sim.advance(TIMEOUT_MS)
        sim.machine.abort_timed_out(sim.now)
        sim.settle()
    world.collect()
    for p in world.producers:
        if p.waiting is not None:
            assert p.waiting[1] in sim.replies, f"{p.waiting[0]} never answered"
    _check(world)


def _check(world: World) -> None:
    sim = world.sim
    # atomicity: one transaction (its Prepare record), one outcome everywhere
    outcomes: dict[tuple[str, int], set[bool]] = {}
    for markers in sim.markers.values():
        for m in markers:
            outcomes.setdefault(m.transaction, set()).add(m.commit)
    mixed = {k: v for k, v in outcomes.items() if len(v) > 1}
    assert not mixed, f"a transaction with both outcomes: {mixed}"
    # acknowledged commits reached every partition they added
    for txn_id, pid, epoch, added in world.committed:
        marker_epoch = epoch + 1 if world.tv >= 2 else epoch
        for tp in added:
            assert any(
                m.commit and m.producer_id == pid and m.producer_epoch in (epoch, marker_epoch)
                for m in sim.markers.get(tp, [])
            ), f"{txn_id}: commit of {pid}/{epoch} missing on {tp}"
    # quiescent: nothing pending, nothing open
    for _, metadata in sim.machine.state.owned():
        assert metadata.pending is None, metadata
        assert metadata.state not in (
            TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
        ), metadata  # fmt: skip
