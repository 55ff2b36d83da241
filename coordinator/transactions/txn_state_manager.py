"""`TransactionStateManager`: the transactional ids of the `__transaction_state` partitions this
node leads, and their writes (Kafka's TransactionStateManager).

- **Ownership.** A transactional id lives in partition `abs(javaHashCode(id)) % partitions`
  (Kafka's `Utils.abs`). The node coordinates the ids of the partitions it leads, each under
  its *coordinator epoch* (the partition's leader epoch), which travels with every marker so
  a partition leader can refuse a deposed coordinator's. A partition being loaded answers
  COORDINATOR_LOAD_IN_PROGRESS; one not led here NOT_COORDINATOR.
- **Writes.** A transition's record goes out as a `TxnWrite`; the caller appends it to the
  partition (acks=all) and reports the outcome with `write_completed`. Success completes the
  transition, if the partition is still loaded at the same coordinator epoch (else
  NOT_COORDINATOR); failure abandons it (its pending state is cleared) and is mapped to
  what clients are told, as Kafka's coordinator maps append errors.
- **Loading** replays the partition's records (the last per id wins, tombstones delete);
  **unloading** forgets them and fails their writes in flight with NOT_COORDINATOR.
- **Expiration** (`transactional.id.expiration.ms`): an id idle that long in Empty,
  CompleteCommit or CompleteAbort is tombstoned and, once that is written, forgotten.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from strom.coordinator.groups.records import partition_for
from strom.coordinator.transactions import txn_log_records
from strom.coordinator.transactions.txn_api import (
    ListedTxn,
    TxnConfig,
    TxnListing,
    TxnWrite,
)
from strom.coordinator.transactions.txn_log_records import TxnRecord
from strom.coordinator.transactions.txn_metadata import TxnMetadata, TxnState, TxnTransit
from strom.wire.errors import ErrorCode

log = logging.getLogger("strom.transactions")

OnWritten = Callable[[int, ErrorCode], None]
"""Called with (now, error) once a transition's write is done: NONE if it is now current."""


def append_error(error: ErrorCode) -> ErrorCode:
    """What a failed `__transaction_state` append is reported as (Kafka's mapping)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


@dataclass
class PartitionTxns:
    """The transactional ids of one loaded partition, under its coordinator epoch."""

    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


@dataclass
class _InFlight:
    write: TxnWrite
    transactional_id: str
    coordinator_epoch: int
    metadata: TxnMetadata
    transit: TxnTransit
    on_written: OnWritten
    keep_pending_on: frozenset[ErrorCode]


class TransactionStateManager:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.transaction_version = 0
        """The finalized `transaction.version` level (the driver keeps it current)."""
        self.partitions: dict[int, PartitionTxns] = {}
        self.loading: dict[int, int] = {}
        """Partitions being loaded -> the coordinator epoch they are loaded at."""
        self._writes: list[TxnWrite] = []
        self._in_flight: dict[int, _InFlight] = {}
        self._tokens = itertools.count(1)
        self._abandoned: set[int] = set()

    # --- ownership -----------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def lookup(self, transactional_id: str) -> tuple[ErrorCode, int, TxnMetadata | None]:
        """(NONE, coordinator epoch, the id's metadata or None if unknown), or the error:
        COORDINATOR_LOAD_IN_PROGRESS while its partition loads, NOT_COORDINATOR if not led."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, None
        cache = self.partitions.get(partition)
        if cache is None:
            return ErrorCode.NOT_COORDINATOR, -1, None
        return ErrorCode.NONE, cache.coordinator_epoch, cache.txns.get(transactional_id)

    def put_if_absent(self, metadata: TxnMetadata) -> TxnMetadata:
        """Add a new id to its (loaded) partition; the one already there if any."""
        cache = self.partitions[self.partition_for(metadata.transactional_id)]
        return cache.txns.setdefault(metadata.transactional_id, metadata)

    def owned(self) -> Iterator[tuple[int, TxnMetadata]]:
        """(coordinator epoch, metadata) of every id of the loaded partitions."""
        for cache in self.partitions.values():
            for metadata in cache.txns.values():
                yield cache.coordinator_epoch, metadata

    # --- loading -------------------------------------------------------------------------------

    def begin_loading(self, now: int, partition: int, coordinator_epoch: int) -> None:
        self.unload(now, partition)
        self.loading[partition] = coordinator_epoch

    def load(
        self, partition: int, coordinator_epoch: int, records: Iterable[TxnRecord]
    ) -> PartitionTxns | None:
        """Replay a partition's records; the loaded ids, or None if the load is stale (the
        partition was unloaded or reloaded at another epoch meanwhile)."""
        if self.loading.get(partition) != coordinator_epoch:
            return None
        txns: dict[str, TxnMetadata] = {}
        for record in records:
            if record.metadata is None:
                txns.pop(record.transactional_id, None)
            else:
                txns[record.transactional_id] = record.metadata
        del self.loading[partition]
        cache = self.partitions[partition] = PartitionTxns(coordinator_epoch, txns)
        return cache

    def unload(self, now: int, partition: int) -> int:
        """Stop coordinating a partition's ids; their writes in flight fail NOT_COORDINATOR.
        Returns how many ids were dropped."""
        self.loading.pop(partition, None)
        cache = self.partitions.pop(partition, None)
        failing = [t for t, f in self._in_flight.items() if f.write.partition == partition]
        for token in failing:
            flight = self._in_flight.pop(token)
            self._abandoned.add(token)
            flight.on_written(now, ErrorCode.NOT_COORDINATOR)
        untaken = {w.token for w in self._writes if w.partition == partition}
        self._abandoned -= untaken
        self._writes = [w for w in self._writes if w.partition != partition]
        return 0 if cache is None else len(cache.txns)

    # --- writes --------------------------------------------------------------------------------

    def append(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransit,
        on_written: OnWritten,
        now: int,
        *,
        keep_pending_on: frozenset[ErrorCode] = frozenset(),
    ) -> None:
        """Write `transit` (a prepared transition of the id); `on_written` gets the outcome.
        `keep_pending_on`: errors after which the transition stays pending (to be retried)."""
        error, epoch, metadata = self.lookup(transactional_id)
        if error or metadata is None or epoch != coordinator_epoch:
            on_written(now, error or ErrorCode.NOT_COORDINATOR)
            return
        if transit.state is TxnState.DEAD:
            record = txn_log_records.tombstone(transactional_id)
        else:
            record = txn_log_records.txn_record(transactional_id, transit, self.transaction_version)
        write = TxnWrite(
            next(self._tokens), self.partition_for(transactional_id), record, transit.timeout_ms
        )
        self._writes.append(write)
        self._in_flight[write.token] = _InFlight(
            write, transactional_id, coordinator_epoch, metadata, transit, on_written,
            keep_pending_on,
        )  # fmt: skip

    def take_writes(self) -> list[TxnWrite]:
        out, self._writes = self._writes, []
        return out

    def write_completed(self, now: int, token: int, error: ErrorCode) -> None:
        flight = self._in_flight.pop(token, None)
        if flight is None:
            if token in self._abandoned:
                self._abandoned.discard(token)
                return
            raise ValueError(f"transaction write {token} is not outstanding")
        txn_id = flight.transactional_id
        current_error, epoch, metadata = self.lookup(txn_id)
        still_ours = (
            not current_error and metadata is flight.metadata and epoch == flight.coordinator_epoch
        )
        if error:
            mapped = append_error(error)
            log.info(
                "transactional id %s: writing %s failed: %s",
                txn_id, flight.transit.state.kafka_name, error.name,
            )  # fmt: skip
            if still_ours and mapped not in flight.keep_pending_on:
                flight.metadata.abort_pending()
            flight.on_written(now, mapped)
            return
        if not still_ours:
            flight.on_written(now, ErrorCode.NOT_COORDINATOR)
            return
        if flight.transit.state is TxnState.DEAD:
            cache = self.partitions[flight.write.partition]
            if cache.txns.get(txn_id) is flight.metadata:
                del cache.txns[txn_id]
        else:
            flight.metadata.complete(flight.transit)
        flight.on_written(now, ErrorCode.NONE)

    # --- timeouts, expiration, listing -----------------------------------------------------------

    def timed_out(self, now: int) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of every Ongoing transaction open past its timeout."""
        return [
            (m.transactional_id, m.producer_id, m.producer_epoch)
            for _, m in self.owned()
            if m.pending is None and m.state is TxnState.ONGOING and m.start_ms + m.timeout_ms < now
        ]

    def expire_ids(self, now: int) -> int:
        """Tombstone ids idle past transactional.id.expiration.ms; how many."""
        expired = 0
        for epoch, metadata in list(self.owned()):
            if (
                metadata.pending is None
                and metadata.state.expiration_allowed
                and metadata.update_ms <= now - self.config.id_expiration_ms
            ):
                transit = metadata.prepare_dead()
                self.append(metadata.transactional_id, epoch, transit, _log_expiry(metadata), now)
                expired += 1
        return expired

    def list_transactions(
        self,
        states: list[str],
        producer_ids: list[int],
        duration_ms: int,
        now: int,
        id_matches: Callable[[str], bool] | None = None,
    ) -> TxnListing:
        """Kafka's listTransactionStates; `id_matches` is the transactional id filter (v2's
        pattern, compiled by the caller: None keeps every id)."""
        if self.loading:
            return TxnListing(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        wanted: set[TxnState] = set()
        unknown: list[str] = []
        for name in states:
            state = TxnState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        pids = set(producer_ids)
        found = [
            ListedTxn(m.transactional_id, m.producer_id, m.state.kafka_name)
            for _, m in self.owned()
            if m.state is not TxnState.DEAD
            and (not pids or m.producer_id in pids)
            and (not states or m.state in wanted)
            and (duration_ms < 0 or now - m.start_ms > duration_ms)
            and (id_matches is None or id_matches(m.transactional_id))
        ]
        return TxnListing(ErrorCode.NONE, found, unknown)


def _log_expiry(metadata: TxnMetadata) -> OnWritten:
    def written(now: int, error: ErrorCode) -> None:
        if error:
            log.warning(
                "transactional id %s: its expiry was not written: %s",
                metadata.transactional_id, error.name,
            )  # fmt: skip
        else:
            log.info("transactional id %s expired", metadata.transactional_id)

    return written
