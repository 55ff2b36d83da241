"""`TransactionCoordinator`: Kafka's transaction coordinator as a pure state machine.

It sits over `TransactionStateManager` (the ids, their partitions and writes) as Kafka's
TransactionCoordinator sits over its TransactionStateManager, and keeps the bookkeeping of
Kafka's TransactionMarkerChannelManager (which transactions wait for markers, and which
partitions still need one); sending is the driver's.

Every call takes `now`; it never reads a clock, opens a socket or allocates a producer id:

- **Replies it holds back** (InitProducerId, AddPartitionsToTxn, EndTxn until their record is
  written) are named by waiter tokens from the caller and come out of `take_replies()`.
- **Producer ids come in.** A call that needs a fresh id (a new transactional id, an
  exhausted epoch) returns `NEED_PRODUCER_ID`; the caller allocates one and calls again with
  it (everything is checked again then).
- **Writes** come out of `take_writes()` (records for `__transaction_state`); the caller
  reports each with `write_completed`.
- **Markers** come out of `take_marker_sends()`: after an EndTxn's PrepareCommit/PrepareAbort
  is written, a COMMIT/ABORT marker goes to every partition of the transaction. The caller
  reports each partition's outcome with `markers_written`; once every partition has its
  marker, CompleteCommit/CompleteAbort is written. Retriable failures are sent again after
  `retry_backoff_ms` (`tick`).
- **Failover.** `load` replays a `__transaction_state` partition when this node becomes its
  leader and finishes what was pending: a transaction in PrepareCommit/PrepareAbort gets its
  markers (again; writing one twice is harmless) and its completion. Open transactions past
  their timeout are aborted by the next `abort_timed_out`.

Epoch rules follow Kafka 4: transactions v1 clients (EndTxn v0-4) must present the current
epoch; transactions v2 (EndTxn v5, `transaction.version` 2) bump the epoch at every EndTxn,
so an EndTxn with the epoch just before the current one is a retry of a finished end.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from strom.coordinator.transactions.txn_api import (
    NEED_PRODUCER_ID,
    DescribedTxn,
    EndResult,
    InitResult,
    MarkerSend,
    NeedProducerId,
    Released,
    Reply,
    TxnConfig,
    TxnListing,
    TxnWrite,
)
from strom.coordinator.transactions.txn_log_records import TxnRecord
from strom.coordinator.transactions.txn_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TopicPartition,
    TxnMetadata,
    TxnState,
    TxnStateError,
    TxnTransit,
    epoch_exhausted,
    supports_epoch_bump,
)
from strom.coordinator.transactions.txn_state_manager import TransactionStateManager
from strom.wire.errors import ErrorCode

log = logging.getLogger("strom.transactions")

EndDone = Callable[[int, ErrorCode, int, int], None]
"""An EndTxn's outcome: (now, error, producer id, producer epoch)."""

MARKER_RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
"""Marker errors after which the marker is sent again (to the partition's leader of then)."""
MARKER_FENCED = frozenset(
    {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
)
"""The producer or this coordinator was superseded: this transaction's markers stop."""
MARKER_NOT_NEEDED = frozenset(
    {ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION}
)


@dataclass(eq=False)
class _PendingCompletion:
    """A transaction whose markers are being written; then `complete` is written."""

    transactional_id: str
    coordinator_epoch: int
    commit: bool
    metadata: TxnMetadata
    complete: TxnTransit


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.state = TransactionStateManager(config)
        self._replies: list[Reply] = []
        self._markers: list[MarkerSend] = []
        self._pending: dict[str, _PendingCompletion] = {}
        self._delayed: list[tuple[int, int, MarkerSend | _PendingCompletion]] = []
        self._seq = itertools.count()

    # --- what comes out --------------------------------------------------------------------------

    def take_replies(self) -> list[Reply]:
        out, self._replies = self._replies, []
        return out

    def take_writes(self) -> list[TxnWrite]:
        return self.state.take_writes()

    def write_completed(self, now: int, token: int, error: ErrorCode) -> None:
        self.state.write_completed(now, token, error)

    def take_marker_sends(self) -> list[MarkerSend]:
        out, self._markers = self._markers, []
        return out

    def next_deadline(self) -> int | None:
        return self._delayed[0][0] if self._delayed else None

    def tick(self, now: int) -> None:
        """Send again the markers and completion writes whose back-off is over."""
        while self._delayed and self._delayed[0][0] <= now:
            _, _, item = heapq.heappop(self._delayed)
            if isinstance(item, MarkerSend):
                if self.marker_still_wanted(item):
                    self._markers.append(item)
            elif self._pending.get(item.transactional_id) is None:
                self._write_completion(now, item)

    def _reply(self, waiter: int | None, result: Released) -> None:
        if waiter is not None:
            self._replies.append((waiter, result))

    def _later(self, now: int, item: MarkerSend | _PendingCompletion) -> None:
        heapq.heappush(self._delayed, (now + self.config.retry_backoff_ms, next(self._seq), item))

    # --- partitions of __transaction_state ---------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.state.partition_for(transactional_id)

    def begin_loading(self, now: int, partition: int, coordinator_epoch: int) -> None:
        """This node leads `partition` at `coordinator_epoch`: COORDINATOR_LOAD_IN_PROGRESS for
        its ids until `load`."""
        self._forget_markers(partition)
        self.state.begin_loading(now, partition, coordinator_epoch)

    def load(
        self, now: int, partition: int, coordinator_epoch: int, records: Iterable[TxnRecord]
    ) -> bool:
        """Replay the partition's records and finish the transactions it left prepared; False
        if the load is stale (the partition was unloaded or reloaded meanwhile)."""
        cache = self.state.load(partition, coordinator_epoch, records)
        if cache is None:
            return False
        for metadata in list(cache.txns.values()):
            if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                commit = metadata.state is TxnState.PREPARE_COMMIT
                log.info(
                    "transactional id %s: completing its %s after loading %s",
                    metadata.transactional_id, "commit" if commit else "abort", partition,
                )  # fmt: skip
                complete = metadata.prepare_complete(now)
                self._send_markers(now, coordinator_epoch, commit, metadata, complete)
        return True

    def unload(self, now: int, partition: int) -> int:
        """This node no longer leads `partition`: forget its ids and their markers; writes in
        flight fail NOT_COORDINATOR. Returns how many ids were dropped."""
        self._forget_markers(partition)
        return self.state.unload(now, partition)

    def _forget_markers(self, partition: int) -> None:
        for txn_id in [t for t in self._pending if self.partition_for(t) == partition]:
            del self._pending[txn_id]
        kept = [
            entry
            for entry in self._delayed
            if self.partition_for(entry[2].transactional_id) != partition
        ]
        if len(kept) != len(self._delayed):
            self._delayed = kept
            heapq.heapify(self._delayed)
        self._markers = [
            m for m in self._markers if self.partition_for(m.transactional_id) != partition
        ]

    # --- InitProducerId ----------------------------------------------------------------------------

    def init_producer_id(
        self,
        now: int,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        waiter: int,
        fresh_producer_id: int | None = None,
    ) -> InitResult | NeedProducerId | None:
        """InitProducerId with a transactional id: the result now, `NEED_PRODUCER_ID`, or None
        until its record is written. `expected`: the (producer id, epoch) the client holds
        (v3+, KIP-360), None when it has none."""
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        error, coordinator_epoch, metadata = self.state.lookup(transactional_id)
        if error:
            return InitResult(error)
        if metadata is None:
            if fresh_producer_id is None:
                return NEED_PRODUCER_ID
            metadata = self.state.put_if_absent(
                TxnMetadata(
                    transactional_id, fresh_producer_id, timeout_ms=timeout_ms, update_ms=now
                )
            )
            fresh_producer_id = None
        if metadata.pending is not None:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _valid_expected_producer(metadata, *expected):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        state = metadata.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is TxnState.ONGOING:
            # Fence the producer and abort its transaction; the client retries (this epoch is
            # never handed out) and then gets the next one.
            fence = metadata.prepare_fence_epoch()

            def fenced(at: int, err: ErrorCode, _pid: int, _epoch: int) -> None:
                self._reply(waiter, InitResult(err or ErrorCode.CONCURRENT_TRANSACTIONS))

            self._end(
                now, transactional_id, fence.producer_id, fence.producer_epoch, False,
                from_client=False, client_tv=self.state.transaction_version, done=fenced,
            )  # fmt: skip
            return None
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            raise TxnStateError(f"{transactional_id}: InitProducerId in state {state.kafka_name}")
        if metadata.epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            if fresh_producer_id is None:
                return NEED_PRODUCER_ID
            transit = metadata.prepare_producer_id_rotation(
                fresh_producer_id, timeout_ms, now, record_last_epoch=expected is not None
            )
        else:
            bumped = metadata.prepare_increment_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
            if bumped is None:
                return InitResult(ErrorCode.PRODUCER_FENCED)
            transit = bumped

        def initialized(at: int, err: ErrorCode) -> None:
            if err:
                self._reply(waiter, InitResult(err))
            else:
                log.info(
                    "transactional id %s: producer id %d epoch %d",
                    transactional_id, transit.producer_id, transit.producer_epoch,
                )  # fmt: skip
                self._reply(
                    waiter, InitResult(ErrorCode.NONE, transit.producer_id, transit.producer_epoch)
                )

        self.state.append(transactional_id, coordinator_epoch, transit, initialized, now)
        return None

    # --- AddPartitionsToTxn, AddOffsetsToTxn, verification ----------------------------------------

    def add_partitions(
        self,
        now: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        waiter: int,
        client_tv: int = 0,
    ) -> ErrorCode | None:
        """Add partitions to the producer's transaction (starting it if none is open): the
        error now (NONE if nothing had to be written), or None until the addition is written."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        wanted = frozenset(partitions)
        error, coordinator_epoch, metadata = self.state.lookup(transactional_id)
        if error:
            return error
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state is TxnState.ONGOING and wanted <= metadata.partitions:
            return ErrorCode.NONE
        transit = metadata.prepare_add_partitions(wanted, now, client_tv)

        def added(at: int, err: ErrorCode) -> None:
            self._reply(waiter, err)

        self.state.append(transactional_id, coordinator_epoch, transit, added, now)
        return None

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1: whether each partition is in the producer's open transaction (NONE),
        or not (TRANSACTION_ABORTABLE), or the error for all of them."""
        wanted = list(dict.fromkeys(partitions))
        if not transactional_id:
            return dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST)
        error, _, metadata = self.state.lookup(transactional_id)
        if not error:
            if metadata is None or metadata.producer_id != producer_id:
                error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            elif metadata.producer_epoch != producer_epoch:
                error = ErrorCode.PRODUCER_FENCED
            elif metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error or metadata is None:
            return dict.fromkeys(wanted, error)
        return {
            tp: ErrorCode.NONE if tp in metadata.partitions else ErrorCode.TRANSACTION_ABORTABLE
            for tp in wanted
        }

    # --- EndTxn ------------------------------------------------------------------------------------

    def end_txn(
        self,
        now: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_tv: int,
        waiter: int,
        fresh_producer_id: int | None = None,
    ) -> EndResult | NeedProducerId | None:
        """EndTxn: the result now, `NEED_PRODUCER_ID` (transactions v2 with the epoch
        exhausted), or None until PrepareCommit/PrepareAbort is written; the markers follow."""
        immediate: list[EndResult] = []
        parked = False

        def done(at: int, error: ErrorCode, pid: int, epoch: int) -> None:
            if parked:
                self._reply(waiter, EndResult(error, pid, epoch))
            else:
                immediate.append(EndResult(error, pid, epoch))

        need = self._end(
            now, transactional_id, producer_id, producer_epoch, commit,
            from_client=True, client_tv=client_tv, done=done, fresh_producer_id=fresh_producer_id,
        )  # fmt: skip
        if need is not None:
            return need
        if immediate:
            return immediate[0]
        parked = True
        return None

    def _end(
        self,
        now: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        from_client: bool,
        client_tv: int,
        done: EndDone,
        fresh_producer_id: int | None = None,
    ) -> NeedProducerId | None:
        """Kafka's endTransaction. `done` gets the outcome exactly once: at once for a refusal
        or an answer that needs no write, else once the prepare is written (and the markers
        are on their way). `NEED_PRODUCER_ID` (and `done` not called): call again with one."""
        if not transactional_id:
            done(now, ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return None
        error, coordinator_epoch, metadata = self.state.lookup(transactional_id)
        if not error and metadata is None:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if error or metadata is None:
            done(now, error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return None
        v2 = supports_epoch_bump(client_tv)
        decision = (
            _end_v2(metadata, producer_id, producer_epoch, commit, from_client)
            if v2
            else _end_v1(metadata, producer_id, producer_epoch, commit, from_client)
        )
        if isinstance(decision, ErrorCode):
            if decision == ErrorCode.NONE and v2:  # a retry of an end already complete
                done(now, ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)
            elif decision == ErrorCode.NONE:  # v1 answers carry no id or epoch
                done(now, ErrorCode.NONE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            else:
                if decision == ErrorCode.INVALID_TXN_STATE:
                    log.info(
                        "transactional id %s: EndTxn(%s) in state %s",
                        transactional_id, "commit" if commit else "abort",
                        metadata.state.kafka_name,
                    )  # fmt: skip
                done(now, decision, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return None
        next_state, no_partition_added = decision
        fencing = metadata.pending is TxnState.PREPARE_EPOCH_FENCE
        next_producer_id = NO_PRODUCER_ID
        if v2 and not fencing and metadata.epoch_exhausted:
            if fresh_producer_id is None:
                return NEED_PRODUCER_ID
            next_producer_id = fresh_producer_id
        if fencing:
            # The fence's epoch becomes the one this abort is written with (transactions v1
            # write it as it is; v2 bumps once more in the prepare, so start from the current).
            metadata.pending = None
            if not v2:
                metadata.producer_epoch = producer_epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = metadata.prepare_abort_or_commit(
            next_state, client_tv, next_producer_id, now, no_partition_added=no_partition_added
        )

        def prepared(at: int, err: ErrorCode) -> None:
            done(
                at,
                *self._after_prepare(
                    at, err, transactional_id, coordinator_epoch, producer_id, producer_epoch,
                    commit, fencing and not v2, v2,
                ),
            )  # fmt: skip

        self.state.append(transactional_id, coordinator_epoch, transit, prepared, now)
        return None

    def _after_prepare(
        self,
        now: int,
        error: ErrorCode,
        transactional_id: str,
        coordinator_epoch: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        v1_fence: bool,
        v2: bool,
    ) -> tuple[ErrorCode, int, int]:
        """The prepare's write is done: answer, and send the markers."""
        current_error, epoch, metadata = self.state.lookup(transactional_id)
        if error:
            if (
                v1_fence
                and not current_error
                and metadata is not None
                and epoch == coordinator_epoch
            ):
                metadata.failed_epoch_fence = True
                log.warning(
                    "transactional id %s: fencing epoch %d was not written (%s)",
                    transactional_id, producer_epoch, error.name,
                )  # fmt: skip
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if current_error or metadata is None or epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if metadata.producer_id != producer_id:
            refusal = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif metadata.producer_epoch != producer_epoch and not (
            v2 and metadata.producer_epoch == producer_epoch + 1
        ):
            refusal = ErrorCode.PRODUCER_FENCED
        elif metadata.pending is not None:
            refusal = ErrorCode.CONCURRENT_TRANSACTIONS
        elif metadata.state is not (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            refusal = ErrorCode.INVALID_TXN_STATE
        else:
            answer = (ErrorCode.NONE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            if v2:  # the id and epoch of the next transaction (an exhausted epoch: a new id)
                if metadata.next_producer_id != NO_PRODUCER_ID:
                    answer = (ErrorCode.NONE, metadata.next_producer_id, 0)
                else:
                    answer = (ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)
            complete = metadata.prepare_complete(now)
            self._send_markers(now, coordinator_epoch, commit, metadata, complete)
            return answer
        return refusal, NO_PRODUCER_ID, NO_PRODUCER_EPOCH

    # --- markers -----------------------------------------------------------------------------------

    def _send_markers(
        self,
        now: int,
        coordinator_epoch: int,
        commit: bool,
        metadata: TxnMetadata,
        complete: TxnTransit,
    ) -> None:
        pending = _PendingCompletion(
            metadata.transactional_id, coordinator_epoch, commit, metadata, complete
        )
        self._pending[metadata.transactional_id] = pending
        if metadata.partitions:
            self._markers.append(
                MarkerSend(
                    metadata.transactional_id,
                    coordinator_epoch,
                    metadata.producer_id,
                    metadata.producer_epoch,
                    commit,
                    frozenset(metadata.partitions),
                )
            )
        self._maybe_complete(now, metadata.transactional_id)

    def marker_still_wanted(self, send: MarkerSend) -> bool:
        """Whether `send` still belongs to a transaction waiting for its markers (a send that
        got no answer is sent again only then)."""
        pending = self._pending.get(send.transactional_id)
        return pending is not None and pending.coordinator_epoch == send.coordinator_epoch

    def markers_written(
        self, now: int, send: MarkerSend, errors: dict[TopicPartition, ErrorCode]
    ) -> None:
        """The outcome of `send`'s markers, per partition. A partition whose topic is gone
        (no leader will ever take the marker) is reported NONE: nothing can read it."""
        pending = self._pending.get(send.transactional_id)
        if pending is None or pending.coordinator_epoch != send.coordinator_epoch:
            return  # cancelled: unloaded, or superseded
        metadata = pending.metadata
        retry: set[TopicPartition] = set()
        for tp, error in errors.items():
            if error == ErrorCode.NONE or error in MARKER_NOT_NEEDED:
                metadata.partitions.discard(tp)
            elif error in MARKER_FENCED:
                log.info(
                    "transactional id %s: marker for %s-%d refused (%s); no more markers",
                    send.transactional_id, tp[0], tp[1], error.name,
                )  # fmt: skip
                del self._pending[send.transactional_id]
                return
            else:
                if error not in MARKER_RETRIABLE:
                    log.error(
                        "transactional id %s: marker for %s-%d failed: %s; retrying",
                        send.transactional_id, tp[0], tp[1], error.name,
                    )  # fmt: skip
                retry.add(tp)
        if retry:
            self._later(
                now,
                MarkerSend(
                    send.transactional_id, send.coordinator_epoch, send.producer_id,
                    send.producer_epoch, send.commit, frozenset(retry),
                ),
            )  # fmt: skip
        else:
            self._maybe_complete(now, send.transactional_id)

    def _maybe_complete(self, now: int, transactional_id: str) -> None:
        pending = self._pending.get(transactional_id)
        if pending is None or pending.metadata.partitions:
            return
        del self._pending[transactional_id]
        self._write_completion(now, pending)

    def _write_completion(self, now: int, pending: _PendingCompletion) -> None:
        def completed(at: int, error: ErrorCode) -> None:
            if error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                self._later(at, pending)  # still pending: write it again
            elif error:
                log.info(
                    "transactional id %s: completion not written: %s",
                    pending.transactional_id, error.name,
                )  # fmt: skip
            else:
                log.debug("transactional id %s: completed", pending.transactional_id)

        self.state.append(
            pending.transactional_id, pending.coordinator_epoch, pending.complete, completed, now,
            keep_pending_on=frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE}),
        )  # fmt: skip

    # --- timeouts and expiration -------------------------------------------------------------------

    def abort_timed_out(self, now: int) -> int:
        """Abort every transaction open past its timeout (fencing its producer); how many."""
        aborted = 0
        for transactional_id, producer_id, _epoch in self.state.timed_out(now):
            error, _, metadata = self.state.lookup(transactional_id)
            if error or metadata is None or metadata.producer_id != producer_id:
                continue
            if metadata.pending is not None:
                continue
            fence = metadata.prepare_fence_epoch()
            log.info(
                "transactional id %s: aborting its transaction open past %d ms",
                transactional_id, metadata.timeout_ms,
            )  # fmt: skip
            self._end(
                now, transactional_id, fence.producer_id, fence.producer_epoch, False,
                from_client=False, client_tv=self.state.transaction_version,
                done=_log_timeout_abort(transactional_id),
            )  # fmt: skip
            aborted += 1
        return aborted

    def expire_transactional_ids(self, now: int) -> int:
        return self.state.expire_ids(now)

    # --- DescribeTransactions, ListTransactions ----------------------------------------------------

    def describe(self, transactional_id: str) -> DescribedTxn:
        if not transactional_id:
            return DescribedTxn(transactional_id, ErrorCode.INVALID_REQUEST)
        error, _, metadata = self.state.lookup(transactional_id)
        if error:
            return DescribedTxn(transactional_id, error)
        if metadata is None or metadata.state is TxnState.DEAD:
            return DescribedTxn(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return DescribedTxn(
            transactional_id,
            ErrorCode.NONE,
            metadata.state.kafka_name,
            metadata.producer_id,
            metadata.producer_epoch,
            metadata.timeout_ms,
            metadata.start_ms,
            sorted(metadata.partitions),
        )

    def list_transactions(
        self,
        now: int,
        states: list[str],
        producer_ids: list[int],
        duration_ms: int = -1,
        id_matches: Callable[[str], bool] | None = None,
    ) -> TxnListing:
        return self.state.list_transactions(states, producer_ids, duration_ms, now, id_matches)


def _valid_expected_producer(metadata: TxnMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: a producer that presents its id and epoch continues only if it is not fenced:
    the id was just created, or it is the current one (its epoch is checked by the bump), or
    it is the previous one with an exhausted epoch (a retry across an id rotation)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == metadata.producer_id
        or (producer_id == metadata.prev_producer_id and epoch_exhausted(epoch))
    )


EndDecision = ErrorCode | tuple[TxnState, bool]
"""An error to answer (NONE: already done), or the state to prepare and whether it is an
abort of a transaction that added no partition."""


def _end_v1(
    m: TxnMetadata, producer_id: int, epoch: int, commit: bool, from_client: bool
) -> EndDecision:
    """Kafka's endTransactionWithTV1 checks: the exact epoch from a client."""
    if m.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if (from_client and epoch != m.producer_epoch) or epoch < m.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if m.pending is not None and m.pending is not TxnState.PREPARE_EPOCH_FENCE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return _by_state(m, commit, retry=True)


def _end_v2(
    m: TxnMetadata, producer_id: int, epoch: int, commit: bool, from_client: bool
) -> EndDecision:
    """Kafka's transactions v2 checks: every end bumps the epoch, so the epoch just before
    the current one is a retry of a finished end, and an abort is allowed with nothing open."""
    fencing = m.pending is TxnState.PREPARE_EPOCH_FENCE
    retry_on_overflow = (
        not fencing
        and m.prev_producer_id == producer_id
        and epoch == SHORT_MAX - 1
        and m.producer_epoch == 0
    )
    retry_on_bump = not fencing and m.producer_epoch == epoch + 1
    if fencing:
        valid = (not from_client or epoch == m.producer_epoch) and epoch >= m.producer_epoch
    elif m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        valid = retry_on_bump
    elif m.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        valid = retry_on_bump or retry_on_overflow or epoch == m.producer_epoch
    else:
        valid = epoch == m.producer_epoch
    if m.producer_id != producer_id and not retry_on_overflow:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if m.pending is not None and not fencing:
        return ErrorCode.CONCURRENT_TRANSACTIONS  # before the epoch: the end in flight wins
    if not valid:
        return ErrorCode.PRODUCER_FENCED
    retry = retry_on_bump or retry_on_overflow
    if m.state is TxnState.EMPTY:
        return (TxnState.PREPARE_ABORT, True) if not commit else ErrorCode.INVALID_TXN_STATE
    if m.state is TxnState.COMPLETE_COMMIT:
        if commit:
            return ErrorCode.NONE if retry else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE if retry else (TxnState.PREPARE_ABORT, True)
    if m.state is TxnState.COMPLETE_ABORT:
        if commit:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE if retry else (TxnState.PREPARE_ABORT, True)
    return _by_state(m, commit, retry=False)


def _by_state(m: TxnMetadata, commit: bool, *, retry: bool) -> EndDecision:
    """Ongoing ends; Prepare* is an end in progress; (v1) Complete* a retry of a finished one."""
    state = m.state
    if state is TxnState.ONGOING:
        return (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT), False
    if state is TxnState.COMPLETE_COMMIT and retry:
        return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
    if state is TxnState.COMPLETE_ABORT and retry:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE
    if state is TxnState.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
    if state is TxnState.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS
    if state is TxnState.EMPTY:
        return ErrorCode.INVALID_TXN_STATE
    raise TxnStateError(f"{m.transactional_id}: EndTxn in state {state.kafka_name}")


def _log_timeout_abort(transactional_id: str) -> EndDone:
    def done(now: int, error: ErrorCode, _pid: int, _epoch: int) -> None:
        if error in (
            ErrorCode.NONE,
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            ErrorCode.PRODUCER_FENCED,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            log.debug("transactional id %s: timeout abort: %s", transactional_id, error.name)
        else:
            log.warning(
                "transactional id %s: timeout abort failed: %s", transactional_id, error.name
            )

    return done
