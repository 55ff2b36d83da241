"""`TransactionDriver`: the trio shell around `TransactionCoordinator`.

It owns everything the state machine may not: the clock, producer-id allocation, the logs
of `__transaction_state` (created through the controller on first use), the waiting, and
the sending of transaction markers.

- **Writes.** The records the machine emits are appended (one uncompressed batch each, in
  order) to their `__transaction_state` partition with acks=all (`CoordinatorTopic.append`);
  each outcome goes back with `write_completed`, after the ISR holds the record on a
  replicated partition (the wait runs in a task of `run`). Only then does the machine act:
  InitProducerId, AddPartitionsToTxn and EndTxn are answered once their transition is
  durable.
- **Markers.** After an EndTxn's prepare is written the machine hands out `MarkerSend`s; a
  task per send writes them through `MarkerChannel` (each partition's leader, in-process for
  this node's own) and reports each partition's outcome; sends that got no answer are tried
  again after a back-off while the transaction still waits for them.
- **Producer ids** come from `new_producer_id` (the broker's controller-allocated blocks)
  when the machine asks for one.
- **Leadership.** A node coordinates exactly the transactional ids whose partition
  (`partition_for`) it leads, under that partition's leader epoch (the coordinator epoch
  every marker carries). `follow` runs after each metadata change: a partition this node
  now leads (or leads at a new epoch) is loaded from its log in a worker thread
  (COORDINATOR_LOAD_IN_PROGRESS until then) and its prepared transactions completed; one it
  stopped leading is unloaded (its writes in flight answered NOT_COORDINATOR).
- **Timers.** `run` ticks the machine at its deadlines (marker and completion retries),
  aborts transactions open past their timeout every
  `transaction.abort.timed.out.transaction.cleanup.interval.ms` and expires idle
  transactional ids every `transaction.remove.expired.transaction.cleanup.interval.ms`.

On shutdown every parked response is released with NOT_COORDINATOR, as a resigning Kafka
coordinator answers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol, TypeVar

import trio

from strom.broker import runtime
from strom.broker.drivers.coordinator_host import CoordinatorHost
from strom.broker.drivers.coordinator_topic import CoordinatorTopic, Replicated, read_batches
from strom.broker.drivers.topics import TRANSACTION_STATE
from strom.coordinator.transactions.txn_api import (
    DescribedTxn,
    EndResult,
    InitResult,
    MarkerSend,
    NeedProducerId,
    TxnConfig,
    TxnListing,
    TxnWrite,
)
from strom.coordinator.transactions.txn_coordinator import TransactionCoordinator
from strom.coordinator.transactions.txn_log_records import TxnRecord, parse_txn_record
from strom.coordinator.transactions.txn_metadata import TopicPartition
from strom.storage import PartitionLog
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import Record, build_batch

log = logging.getLogger("strom.transactions")
R = TypeVar("R")
Answer = TypeVar("Answer", InitResult, EndResult)

MARKER_RETRY_S = 0.1
"""How soon a marker send that got no answer is tried again."""


class MarkerChannel(Protocol):
    """How markers reach the partitions' leaders."""

    async def write(self, send: MarkerSend) -> dict[TopicPartition, ErrorCode] | None:
        """Write `send`'s marker to each of its partitions through the partition's leader:
        the outcome per partition (NONE once committed there; a partition whose topic no
        longer exists is NONE too, as nothing will read it), or None when no answer came (a
        leader unreachable: the send is tried again)."""
        ...

    async def aclose(self) -> None:
        """Close its connections (at shutdown)."""
        ...


NewProducerId = Callable[[], Awaitable[int | ErrorCode]]
"""A fresh producer id, or the error InitProducerId answers when none can be had."""


def read_txn_partition(partition_log: PartitionLog, read_bytes: int) -> list[TxnRecord]:
    """Every record of one `__transaction_state` partition, in log order (blocking: run it in
    a worker thread). Unreadable records are skipped with a warning, as Kafka skips them."""
    out: list[TxnRecord] = []
    for header, records in read_batches(partition_log, read_bytes):
        if header.is_control:
            continue
        for record in records:
            try:
                parsed = parse_txn_record(record.key, record.value)
            except ProtocolError as exc:
                log.warning("%s: skipping an unreadable record: %s", partition_log.name, exc)
                continue
            if parsed is not None:
                out.append(parsed)
    return out


class TransactionDriver(CoordinatorHost):
    """Hosts `TransactionCoordinator`: time, waiting, writes, markers and producer ids."""

    def __init__(
        self,
        topic: CoordinatorTopic,
        config: TxnConfig,
        *,
        markers: MarkerChannel,
        new_producer_id: NewProducerId,
        transaction_version: Callable[[], int],
        clock: Callable[[], int],
        abort_interval_ms: int,
        expire_interval_ms: int,
        load_buffer_bytes: int = 5 * 1024 * 1024,
    ) -> None:
        super().__init__(topic, clock)
        self.machine = TransactionCoordinator(config)
        self.markers = markers
        self._new_producer_id = new_producer_id
        self._transaction_version = transaction_version
        self._abort_every = abort_interval_ms
        self._expire_every = expire_interval_ms
        self._read_bytes = load_buffer_bytes
        self.owned: dict[int, int] = {}
        """`__transaction_state` partitions this node leads and has loaded -> coordinator epoch."""
        self.loading: dict[int, int] = {}
        """Partitions being loaded -> the coordinator epoch they are loaded at."""
        self._to_load, self._load_queue = trio.open_memory_channel[tuple[int, int]](math.inf)
        self._to_send, self._send_queue = trio.open_memory_channel[MarkerSend](math.inf)

    @property
    def transaction_version(self) -> int:
        """The finalized `transaction.version` level of the cluster."""
        return self._transaction_version()

    # --- leadership and loading ----------------------------------------------------------------

    async def load(self) -> None:
        """Load every partition this node leads (before the listeners accept)."""
        for partition, epoch in self._led().items():
            led = self.topic.leader(partition)
            if led is None:
                continue
            self.machine.begin_loading(self.now(), partition, epoch)
            records = await runtime.to_thread(read_txn_partition, led[0], self._read_bytes)
            self.machine.load(self.now(), partition, epoch, records)
            self.owned[partition] = epoch
        self._settle()

    def _led(self) -> dict[int, int]:
        out = {}
        for partition in self.topic.partitions() or []:
            led = self.topic.leader(partition)
            if led is not None:
                out[partition] = led[1]
        return out

    def follow(self) -> None:
        """Follow the leadership of `__transaction_state` (after each metadata change)."""
        led = self._led()
        for partition, epoch in list(self.owned.items()) + list(self.loading.items()):
            if led.get(partition) != epoch:
                self._unload(partition)
        for partition, epoch in sorted(led.items()):
            if partition not in self.owned and partition not in self.loading:
                self._start_loading(partition, epoch)

    def _start_loading(self, partition: int, epoch: int) -> None:
        led = self.topic.leader(partition)
        self.machine.begin_loading(self.now(), partition, epoch)
        if led is not None and led[0].log_end_offset <= led[0].log_start_offset:
            self.machine.load(self.now(), partition, epoch, [])  # nothing to read
            self.owned[partition] = epoch
            self._settle()
            return
        self.loading[partition] = epoch
        self._to_load.send_nowait((partition, epoch))

    def _unload(self, partition: int) -> None:
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        dropped = self.machine.unload(self.now(), partition)
        self._settle()
        log.info(
            "no longer leading %s-%d: unloaded %d transactional ids",
            TRANSACTION_STATE, partition, dropped,
        )  # fmt: skip

    async def _loader(self) -> None:
        async for partition, epoch in self._load_queue:
            led = self.topic.leader(partition)
            if self.loading.get(partition) != epoch or led is None:
                continue
            records = await runtime.to_thread(read_txn_partition, led[0], self._read_bytes)
            if self.loading.get(partition) != epoch:
                continue
            del self.loading[partition]
            if self.machine.load(self.now(), partition, epoch, records):
                self.owned[partition] = epoch
                log.info(
                    "loaded %s-%d at coordinator epoch %d: now coordinating its transactions",
                    TRANSACTION_STATE, partition, epoch,
                )  # fmt: skip
            self._settle()

    # --- the background tasks --------------------------------------------------------------

    async def _background(self, nursery: trio.Nursery) -> None:
        """Load newly led partitions, send markers, fire the machine's deadlines and the
        periodic aborts and expirations."""
        nursery.start_soon(self._loader)
        nursery.start_soon(self._marker_sends, nursery)
        await self._timer()

    def _write_completed(self, token: int, error: ErrorCode) -> None:
        self.machine.write_completed(self.now(), token, error)

    async def _marker_sends(self, nursery: trio.Nursery) -> None:
        async for send in self._send_queue:
            nursery.start_soon(self._deliver, send)

    async def _deliver(self, send: MarkerSend) -> None:
        while not self._closed:
            errors = await self.markers.write(send)
            if self.closed:
                return
            if errors is not None:
                self.machine.markers_written(self.now(), send, errors)
                self._settle()
                return
            await trio.sleep(MARKER_RETRY_S)
            if not self.machine.marker_still_wanted(send):
                return

    async def _timer(self) -> None:
        now = self.now()
        next_abort, next_expire = now + self._abort_every, now + self._expire_every
        while True:
            deadline = self.machine.next_deadline()
            wake = min(next_abort, next_expire, *(() if deadline is None else (deadline,)))
            self._kick = trio.Event()
            with trio.move_on_after(max(0, wake - self.now()) / 1000):
                await self._kick.wait()
            now = self.now()
            if now >= next_abort:
                self._sync_version()
                aborted = self.machine.abort_timed_out(now)
                if aborted:
                    log.info("aborting %d timed-out transactions", aborted)
                next_abort = now + self._abort_every
            if now >= next_expire:
                expired = self.machine.expire_transactional_ids(now)
                if expired:
                    log.info("expiring %d idle transactional ids", expired)
                next_expire = now + self._expire_every
            self._settle()

    # --- ownership --------------------------------------------------------------------------

    async def ensure_topic(self) -> ErrorCode:
        """__transaction_state exists (created on first use, as Kafka does)."""
        error = await super().ensure_topic()
        if not error:
            self.follow()
        return error

    def partition_for(self, transactional_id: str) -> int:
        return self.machine.partition_for(transactional_id)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """NONE if this node coordinates the id, COORDINATOR_LOAD_IN_PROGRESS while its
        partition loads, else NOT_COORDINATOR (the client looks the coordinator up again)."""
        return self._partition_error(self.partition_for(transactional_id))

    # --- requests -----------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitResult:
        """InitProducerId with a transactional id (call `ready` first)."""
        call = partial(
            self.machine.init_producer_id,
            transactional_id=transactional_id,
            timeout_ms=timeout_ms,
            expected=expected,
        )
        return await self._with_producer_id(call, InitResult)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        client_tv: int = 0,
    ) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn for one transaction (call `ready` first)."""
        return await self._request(
            partial(
                self.machine.add_partitions,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=partitions,
                client_tv=client_tv,
            ),
            ErrorCode,
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 verification (call `coordinator_error` first)."""
        return self.machine.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_tv: int,
    ) -> EndResult:
        """EndTxn (call `ready` first): answered once the prepare is written."""
        call = partial(
            self.machine.end_txn,
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            client_tv=client_tv,
        )
        return await self._with_producer_id(call, EndResult)

    async def _with_producer_id(
        self,
        call: Callable[..., Answer | NeedProducerId | None],
        refused: Callable[[ErrorCode], Answer],
    ) -> Answer:
        """`call` until the machine no longer asks for a fresh producer id."""
        def refuse(error: ErrorCode) -> Answer | NeedProducerId:
            return refused(error)

        fresh: int | None = None
        while True:
            step: Callable[..., Answer | NeedProducerId | None] = partial(
                call, fresh_producer_id=fresh
            )
            outcome = await self._request(step, refuse)
            if not isinstance(outcome, NeedProducerId):
                return outcome
            allocated = await self._new_producer_id()
            if isinstance(allocated, ErrorCode):
                return refused(allocated)
            fresh = allocated

    def describe(self, transactional_id: str) -> DescribedTxn:
        error = self.coordinator_error(transactional_id) if transactional_id else ErrorCode.NONE
        if error:
            return DescribedTxn(transactional_id, error)
        return self.machine.describe(transactional_id)

    def list_transactions(
        self,
        states: list[str],
        producer_ids: list[int],
        duration_ms: int,
        id_matches: Callable[[str], bool] | None = None,
    ) -> TxnListing:
        if self._closed:
            return TxnListing(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.follow()
        return self.machine.list_transactions(
            self.now(), states, producer_ids, duration_ms, id_matches
        )

    # --- internals ----------------------------------------------------------------------------

    async def _request(self, call: Callable[..., R | None], refused: Callable[[ErrorCode], R]) -> R:
        self._sync_version()
        return await super()._request(call, refused)

    def _sync_version(self) -> None:
        self.machine.state.transaction_version = self.transaction_version

    def _settle(self) -> None:
        """Fire due deadlines, write what the machine emitted, send its markers, release
        replies, re-arm the timer."""
        self.machine.tick(self.now())
        writes = self.machine.take_writes()
        while writes:
            for write in writes:
                self._appended(write.token, self._append(write))
            writes = self.machine.take_writes()
        for send in self.machine.take_marker_sends():
            self._to_send.send_nowait(send)
        self._release(self.machine.take_replies())

    def _append(self, write: TxnWrite) -> ErrorCode | Replicated:
        if self.topic.leader(write.partition) is None:
            if write.partition in (self.topic.partitions() or []):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        now = self.now()
        key, value = write.record
        batch = build_batch([Record(key, value, timestamp=now)])
        outcome = self.topic.append(write.partition, batch, now, write.timeout_ms)
        if isinstance(outcome, ErrorCode) and outcome != ErrorCode.NONE:
            log.error(
                "append to %s-%d failed: %s", TRANSACTION_STATE, write.partition, outcome.name
            )
        return outcome
