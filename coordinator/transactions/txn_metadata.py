"""One transactional id's state and the transitions it may make (Kafka's TransactionMetadata).

A transition is two-phase, as in Kafka: `prepare_*` checks it against the current state and
returns the target (`TxnTransit`) while marking it *pending*, so no other transition can start;
the target is written to `__transaction_state`, and only once the write succeeded does
`complete` make it current (a failed write calls `abort_pending`). So what the coordinator
answers and acts on is always what the log holds.

States, with Kafka's ids and names (DescribeTransactions and ListTransactions report the names):

```
 Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
   ▲  ▲                               │  │ ▲                                                      │
   │  └──── InitProducerId ◀──────────┼──┼─┼──────────── InitProducerId / AddPartitions ◀────────┤
   │        (epoch bump)              │  │ └─ AddPartitions                                       │
   │                                  │  └─EndTxn(abort)──▶ PrepareAbort ──markers──▶ CompleteAbort
   │                                  └─fence (InitProducerId, timeout)─▶ PrepareEpochFence ─▶ PrepareAbort
 Dead: an expired transactional id on its way out (its tombstone being written).
```

PrepareEpochFence is never written: fencing bumps the epoch and writes PrepareAbort.

Epochs: an epoch is an int16; a producer may never use Short.MAX_VALUE, so the coordinator can
always fence it, and an id whose epoch reaches MAX_VALUE - 1 is *exhausted*: the next
InitProducerId (or, with transactions v2, the next EndTxn) rotates to a fresh producer id.
With transactions v2 (KIP-890 part 2, `client_tv >= 2`) every EndTxn bumps the epoch, so a
late write of the finished transaction is fenced by the partition leaders.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NoReturn

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 2**15 - 1

TopicPartition = tuple[str, int]


class TxnStateError(Exception):
    """A transition the state machine must never attempt (a bug, as Kafka's fatal errors)."""


class TxnState(IntEnum):
    """Kafka's transaction states; the value is the id written to `__transaction_state`."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset(_COMPLETED),
    TxnState.ONGOING: frozenset((TxnState.ONGOING, *_COMPLETED)),
    TxnState.PREPARE_COMMIT: frozenset((TxnState.ONGOING,)),
    TxnState.PREPARE_ABORT: frozenset(
        (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, *_COMPLETED)
    ),
    TxnState.COMPLETE_COMMIT: frozenset((TxnState.PREPARE_COMMIT,)),
    TxnState.COMPLETE_ABORT: frozenset((TxnState.PREPARE_ABORT,)),
    TxnState.DEAD: frozenset(_COMPLETED),
    TxnState.PREPARE_EPOCH_FENCE: frozenset((TxnState.ONGOING,)),
}
"""Kafka's validPreviousStates: a transition to the key may start from these states. With
transactions v2 an abort may start from Empty or a completed transaction: the client cannot
know whether its produce added a partition, so it aborts whenever unsure."""


def epoch_exhausted(epoch: int) -> bool:
    """No epoch is left for a producer to use after `epoch` (Kafka keeps MAX_VALUE for fencing)."""
    return epoch >= SHORT_MAX - 1


def supports_epoch_bump(client_tv: int) -> bool:
    """Transactions v2 (KIP-890 part 2): every EndTxn bumps the producer epoch."""
    return client_tv >= 2


@dataclass(frozen=True)
class TxnTransit:
    """The target of a transition, as written to `__transaction_state` (Kafka's
    TxnTransitMetadata)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int
    client_tv: int = 0


@dataclass(eq=False)
class TxnMetadata:
    """The current state of one transactional id, and its pending transition if any."""

    transactional_id: str
    producer_id: int
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 0
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    client_tv: int = 0
    pending: TxnState | None = None
    """The state a transition being written leads to (Kafka's pendingState)."""
    failed_epoch_fence: bool = False
    """A fence's bumped epoch may not have been written: the next fence does not bump again."""

    # --- queries ---------------------------------------------------------------------------

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT)

    @property
    def at_least_v2(self) -> bool:
        """Transactions v2 rules apply to its EndTxn epochs (not while fencing)."""
        return self.pending is not TxnState.PREPARE_EPOCH_FENCE and supports_epoch_bump(
            self.client_tv
        )

    def epoch_bumped_by_end_txn(self, epoch: int) -> bool:
        """Transactions v2: the stored epoch is `epoch + 1`, i.e. `epoch`'s EndTxn bumped it."""
        return self.at_least_v2 and self.producer_epoch == epoch + 1

    # --- preparing transitions ---------------------------------------------------------------

    def prepare_fence_epoch(self) -> TxnTransit:
        """Fence the current producer (its open transaction is about to be aborted)."""
        if self.producer_epoch == SHORT_MAX:
            raise TxnStateError(f"{self.transactional_id}: cannot fence epoch {SHORT_MAX}")
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            TxnState.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
            self.timeout_ms, frozenset(self.partitions), self.start_ms, self.update_ms,
            client_tv=self.client_tv,
        )  # fmt: skip

    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | None:
        """InitProducerId's epoch bump; None if `expected_epoch` is fenced (PRODUCER_FENCED)."""
        if self.epoch_exhausted:
            raise TxnStateError(f"{self.transactional_id}: producer {self.producer_id} exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch  # a producer recovering (KIP-360)
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of a success
        else:
            return None
        return self._prepare(
            TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now,
            client_tv=self.client_tv,
        )  # fmt: skip

    def prepare_producer_id_rotation(
        self, producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransit:
        if self.has_pending_transaction:
            raise TxnStateError(f"{self.transactional_id}: rotating ids with a transaction open")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(
            TxnState.EMPTY, producer_id, 0, last, timeout_ms, frozenset(), -1, now,
            client_tv=self.client_tv,
        )  # fmt: skip

    def prepare_add_partitions(
        self, added: Iterable[TopicPartition], now: int, client_tv: int
    ) -> TxnTransit:
        start = now if self.state in _COMPLETED else self.start_ms
        return self._prepare(
            TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.timeout_ms, frozenset(self.partitions) | frozenset(added), start, now,
            client_tv=client_tv,
        )  # fmt: skip

    def prepare_abort_or_commit(
        self,
        state: TxnState,
        client_tv: int,
        next_producer_id: int,
        now: int,
        *,
        no_partition_added: bool = False,
    ) -> TxnTransit:
        """EndTxn. `no_partition_added`: a transactions v2 abort of a transaction that added
        nothing (its start is unknown, so it starts now)."""
        if supports_epoch_bump(client_tv):
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        start = now if no_partition_added else self.start_ms
        return self._prepare(
            state, self.producer_id, epoch, last, self.timeout_ms, frozenset(self.partitions),
            start, now, next_producer_id=next_producer_id, client_tv=client_tv,
        )  # fmt: skip

    def prepare_complete(self, now: int) -> TxnTransit:
        """After every marker is written: CompleteCommit or CompleteAbort."""
        state = (
            TxnState.COMPLETE_COMMIT
            if self.state is TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        self.failed_epoch_fence = False
        if supports_epoch_bump(self.client_tv) and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0  # the epoch overflowed: rotate now
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        # An overflow keeps the last epoch at MAX - 1, the last one the client saw.
        return self._prepare(
            state, producer_id, epoch, self.last_producer_epoch, self.timeout_ms, frozenset(),
            self.start_ms, now, client_tv=self.client_tv,
        )  # fmt: skip

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(
            TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.timeout_ms, frozenset(), self.start_ms, self.update_ms, client_tv=self.client_tv,
        )  # fmt: skip

    def _prepare(
        self,
        state: TxnState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        now: int,
        *,
        next_producer_id: int = NO_PRODUCER_ID,
        client_tv: int = 0,
    ) -> TxnTransit:
        if self.pending is not None:
            raise TxnStateError(
                f"{self.transactional_id}: transition to {state.kafka_name} while one to "
                f"{self.pending.kafka_name} is pending"
            )
        if producer_id < 0:
            raise TxnStateError(f"{self.transactional_id}: illegal producer id {producer_id}")
        if state is not TxnState.DEAD and epoch < 0:
            raise TxnStateError(f"{self.transactional_id}: illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise TxnStateError(
                f"{self.transactional_id}: no transition from {self.state.kafka_name} "
                f"to {state.kafka_name}"
            )
        self.pending = state
        return TxnTransit(
            producer_id, self.producer_id, next_producer_id, epoch, last_epoch, timeout_ms,
            state, partitions, start_ms, now, client_tv,
        )  # fmt: skip

    # --- completing or abandoning them ---------------------------------------------------------

    def abort_pending(self) -> None:
        """The transition's write failed: nothing changes, other transitions may start."""
        self.pending = None

    def complete(self, transit: TxnTransit) -> None:
        """The transition is written: make it current (checked as Kafka's completeTransitionTo)."""
        to = self.pending
        if to is None or to is not transit.state:
            self._refuse(transit, f"pending {to}")
        if to is TxnState.EMPTY:  # InitProducerId
            if (
                (self.producer_epoch != transit.producer_epoch and not self._valid_bump(transit))
                or transit.partitions
                or transit.start_ms != -1
            ):
                self._refuse(transit, "not an epoch bump")
            self.timeout_ms = transit.timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.prev_producer_id = transit.prev_producer_id
        elif to is TxnState.ONGOING:  # AddPartitions
            if (
                not self._valid_epoch(transit)
                or not self.partitions <= transit.partitions
                or self.timeout_ms != transit.timeout_ms
            ):
                self._refuse(transit, "not an addition")
            self.start_ms = transit.start_ms
            self.partitions |= transit.partitions
        elif to in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):  # EndTxn
            v2 = supports_epoch_bump(transit.client_tv)
            empty_abort = to is TxnState.PREPARE_ABORT and v2 and self.state in _COMPLETED
            if (
                not self._valid_epoch(transit)
                or self.partitions != transit.partitions
                or self.timeout_ms != transit.timeout_ms
                or (self.start_ms != transit.start_ms and not empty_abort)
            ):
                self._refuse(transit, "not the transaction's end")
            if v2:
                self.producer_epoch = transit.producer_epoch
                self.last_producer_epoch = transit.last_producer_epoch
                self.next_producer_id = transit.next_producer_id
                self.start_ms = transit.start_ms
        elif to in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):  # markers written
            if (
                not self._valid_epoch(transit)
                or self.timeout_ms != transit.timeout_ms
                or transit.start_ms == -1
            ):
                self._refuse(transit, "not the completion")
            self.start_ms = transit.start_ms
            self.partitions.clear()
            if supports_epoch_bump(transit.client_tv):
                self.producer_epoch = transit.producer_epoch
                self.last_producer_epoch = transit.last_producer_epoch
                self.prev_producer_id = transit.prev_producer_id
                self.producer_id = transit.producer_id
                self.next_producer_id = transit.next_producer_id
        else:  # PrepareEpochFence and Dead are never completed (Dead is removed instead)
            self._refuse(transit, "never completed")
        self.client_tv = transit.client_tv
        self.update_ms = transit.update_ms
        self.pending = None
        self.state = to

    def _valid_epoch(self, transit: TxnTransit) -> bool:
        """The transition continues this producer: with transactions v2 a prepare bumped the
        epoch (its last epoch is ours) and an overflowing completion moved to the next id (its
        previous id is ours, its last epoch unchanged); otherwise id and epoch are ours."""
        v2 = supports_epoch_bump(transit.client_tv)
        completing = transit.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        preparing = transit.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        if v2 and completing and transit.producer_epoch == 0:
            return (
                transit.last_producer_epoch == self.last_producer_epoch
                and transit.prev_producer_id == self.producer_id
            )
        if v2 and preparing:
            return (
                transit.last_producer_epoch == self.producer_epoch
                and transit.producer_id == self.producer_id
            )
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_bump(self, transit: TxnTransit) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _refuse(self, transit: TxnTransit, why: str) -> NoReturn:
        raise TxnStateError(f"{self.transactional_id}: cannot complete {transit} ({why})")
