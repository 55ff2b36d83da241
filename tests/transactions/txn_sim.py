"""A harness around the pure transaction coordinator: a fake clock, an in-memory
`__transaction_state`, partition leaders that take markers, and parked replies.

Writes are appended to `log` and reported back at once, as the driver does, unless `hold` is
set (then `complete_writes()` releases them) or `fail` names an append error. Markers go to
`markers` (what each partition holds, in order) and are answered NONE at once unless
`marker_errors` says otherwise for a partition.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from strom.coordinator.transactions.txn_api import (
    NEED_PRODUCER_ID,
    EndResult,
    InitResult,
    MarkerSend,
    NeedProducerId,
    Released,
    TxnConfig,
    TxnWrite,
)
from strom.coordinator.transactions.txn_coordinator import TransactionCoordinator
from strom.coordinator.transactions.txn_log_records import TxnRecord, parse_txn_record
from strom.coordinator.transactions.txn_metadata import TopicPartition, TxnMetadata, TxnState
from strom.wire.errors import ErrorCode


@dataclass
class Marker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction: tuple[str, int] = ("", -1)
    """(transactional id, position of its Prepare record in the log): which transaction."""


@dataclass
class TxnSim:
    partitions: int = 1
    transaction_version: int = 0
    now: int = 1_000_000
    log: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    held: list[TxnWrite] = field(default_factory=list)
    hold: bool = False
    fail: ErrorCode = ErrorCode.NONE
    markers: dict[TopicPartition, list[Marker]] = field(default_factory=dict)
    marker_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    hold_markers: bool = False
    held_markers: list[MarkerSend] = field(default_factory=list)
    replies: dict[int, Released] = field(default_factory=dict)
    coordinator_epoch: int = 0

    def __post_init__(self) -> None:
        self._pids = itertools.count(1000)
        self._tokens = itertools.count(1)
        self.machine = self._new_machine()
        for p in range(self.partitions):
            self.machine.begin_loading(self.now, p, self.coordinator_epoch)
            assert self.machine.load(self.now, p, self.coordinator_epoch, [])

    def _new_machine(self) -> TransactionCoordinator:
        machine = TransactionCoordinator(
            TxnConfig(
                num_partitions=self.partitions, max_timeout_ms=60_000, id_expiration_ms=100_000
            )
        )
        machine.state.transaction_version = self.transaction_version
        return machine

    # --- the driver's loop -----------------------------------------------------------------------

    def settle(self) -> None:
        self.machine.tick(self.now)
        for _ in range(100):
            progressed = False
            writes = self.machine.take_writes()
            if writes:
                progressed = True
                self.held += writes
            if not self.hold:
                progressed |= self.complete_writes()
            sends = self.machine.take_marker_sends()
            if sends:
                progressed = True
                self.held_markers += sends
            if not self.hold_markers:
                progressed |= self.deliver_markers()
            if not progressed:
                break
        self._collect()

    def complete_writes(self, error: ErrorCode | None = None) -> bool:
        done = bool(self.held)
        while self.held:
            write = self.held.pop(0)
            outcome = self.fail if error is None else error
            if not outcome:
                self.log.setdefault(write.partition, []).append(write.record)
            self.machine.write_completed(self.now, write.token, outcome)
        self._collect()
        return done

    def deliver_markers(self) -> bool:
        done = bool(self.held_markers)
        while self.held_markers:
            send = self.held_markers.pop(0)
            errors = {}
            for tp in send.partitions:
                error = self.marker_errors.get(tp, ErrorCode.NONE)
                if not error:
                    self.markers.setdefault(tp, []).append(
                        Marker(
                            send.producer_id,
                            send.producer_epoch,
                            send.commit,
                            send.coordinator_epoch,
                            self._prepared(send.transactional_id, send.commit),
                        )
                    )
                errors[tp] = error
            self.machine.markers_written(self.now, send, errors)
        return done

    def _prepared(self, txn_id: str, commit: bool) -> tuple[str, int]:
        """The Prepare record a marker belongs to: the id's last one in the log, which must
        carry the marker's outcome."""
        partition = self.machine.partition_for(txn_id)
        for index in range(len(self.log.get(partition, [])) - 1, -1, -1):
            key, value = self.log[partition][index]
            parsed = parse_txn_record(key, value)
            if parsed is None or parsed.transactional_id != txn_id or parsed.metadata is None:
                continue
            state = parsed.metadata.state
            if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                assert (state is TxnState.PREPARE_COMMIT) == commit, "marker against its Prepare"
                return txn_id, index
        raise AssertionError(f"a marker for {txn_id} without a Prepare record in the log")

    def _collect(self) -> None:
        for token, result in self.machine.take_replies():
            assert token not in self.replies, "a waiter was answered twice"
            self.replies[token] = result

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            deadline = self.machine.next_deadline()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self.settle()
        self.now = target
        self.settle()

    def answer(self, outcome: object, token: int) -> Released:
        if outcome is None:
            result = self.replies.get(token)
            assert result is not None, "not answered"
            return result
        assert isinstance(outcome, InitResult | EndResult | ErrorCode), outcome
        return outcome

    # --- requests --------------------------------------------------------------------------------

    def init(
        self, txn_id: str, timeout_ms: int = 10_000, expected: tuple[int, int] | None = None
    ) -> InitResult:
        token = next(self._tokens)
        outcome = self.machine.init_producer_id(self.now, txn_id, timeout_ms, expected, token)
        if isinstance(outcome, NeedProducerId):
            outcome = self.machine.init_producer_id(
                self.now, txn_id, timeout_ms, expected, token, next(self._pids)
            )
        assert not isinstance(outcome, NeedProducerId)
        self.settle()
        result = self.answer(outcome, token)
        assert isinstance(result, InitResult)
        return result

    def add(
        self, txn_id: str, pid: int, epoch: int, *partitions: TopicPartition, tv: int = 0
    ) -> ErrorCode:
        token = next(self._tokens)
        outcome = self.machine.add_partitions(self.now, txn_id, pid, epoch, partitions, token, tv)
        self.settle()
        result = self.answer(outcome, token)
        assert isinstance(result, ErrorCode)
        return result

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool, tv: int = 0) -> EndResult:
        token = next(self._tokens)
        outcome = self.machine.end_txn(self.now, txn_id, pid, epoch, commit, tv, token)
        if outcome is NEED_PRODUCER_ID:
            outcome = self.machine.end_txn(
                self.now, txn_id, pid, epoch, commit, tv, token, next(self._pids)
            )
        assert not isinstance(outcome, NeedProducerId)
        self.settle()
        result = self.answer(outcome, token)
        assert isinstance(result, EndResult)
        return result

    def end_parked(self, txn_id: str, pid: int, epoch: int, commit: bool, tv: int = 0) -> int:
        """An EndTxn whose answer is awaited later: its token."""
        token = next(self._tokens)
        outcome = self.machine.end_txn(self.now, txn_id, pid, epoch, commit, tv, token)
        assert outcome is None, outcome
        self.settle()
        return token

    def metadata(self, txn_id: str) -> TxnMetadata:
        error, _, metadata = self.machine.state.lookup(txn_id)
        assert not error
        assert metadata is not None
        return metadata

    # --- failover ----------------------------------------------------------------------------------

    def records(self, partition: int = 0) -> list[TxnRecord]:
        out = []
        for key, value in self.log.get(partition, []):
            parsed = parse_txn_record(key, value)
            assert parsed is not None
            out.append(parsed)
        return out

    def fail_over(self) -> None:
        """A new coordinator (a new epoch) loads every partition from the log."""
        self.coordinator_epoch += 1
        self.machine = self._new_machine()
        for p in range(self.partitions):
            self.machine.begin_loading(self.now, p, self.coordinator_epoch)
            assert self.machine.load(self.now, p, self.coordinator_epoch, self.records(p))
        self.settle()
