"""`GroupDriver`: the trio shell around `GroupCoordinator`.

It owns everything the state machine may not: the clock, uuids, the logs of
`__consumer_offsets` (created through the controller on first use), and the
waiting. Responses the state machine parks (JoinGroup, SyncGroup, and every
request whose records must be written first) wait on a trio Event until they
are released; a single timer task sleeps until the machine's next deadline
(or until a request moves it) and calls `tick`.

The records the machine emits are appended, in order, to the group's
partition (`CoordinatorTopic.append`, on the event-loop thread), and each outcome
goes back to it with `write_completed`; only then does it act on them and
release the replies waiting on them. Writes go with acks=all semantics, as
Kafka's coordinator writes them: on a single-replica partition the append is
the commit and completes at once; on a replicated one the append hands back a
wait, which a task of `run` awaits (the high watermark passing the batch, the
same wait acks=all produces use) before reporting the outcome. So an
OffsetCommit or SyncGroup is answered only once every ISR member holds its
records, and a commit survives the leader's failover.

The driver reaches the broker only through a `CoordinatorTopic` (which partitions of
`__consumer_offsets` this node leads, their logs, appending to them, creating
the topic; the broker's is strom.broker.data.coordinator_topics), a clock and a few
config values, so it runs without a broker in tests.

Leadership: a node coordinates exactly the groups whose `__consumer_offsets`
partition (`partition_for`) it leads, as in Kafka. `follow` runs after each
metadata change: a partition this node now leads is loaded (its groups replayed
from the log, in a worker thread; COORDINATOR_LOAD_IN_PROGRESS until then), one
it no longer leads is unloaded (its groups forgotten here, their parked requests
answered NOT_COORDINATOR). Requests for any other group answer NOT_COORDINATOR,
so clients ask FindCoordinator again. In issue 11 leadership moves only through
the metadata image; issue 12's failover reuses the same path. On shutdown every
parked response is released with NOT_COORDINATOR, as a Kafka coordinator that
resigns does.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import trio

from strom.broker import runtime
from strom.broker.drivers.coordinator_host import CoordinatorHost
from strom.broker.drivers.coordinator_topic import CoordinatorTopic, Replicated
from strom.broker.drivers.group_loading import read_partition
from strom.broker.drivers.topics import CONSUMER_OFFSETS
from strom.coordinator.groups.api import (
    CommitRequest,
    CommitResult,
    GroupConfig,
    JoinRequest,
    JoinResult,
    OffsetDeleteResult,
    PartitionKey,
    SyncRequest,
    SyncResult,
    TxnCommitRequest,
    Write,
)
from strom.coordinator.groups.coordinator import GroupCoordinator
from strom.coordinator.groups.records import partition_for
from strom.wire.errors import ErrorCode
from strom.wire.records import Record, build_batch

if TYPE_CHECKING:
    from strom.config import BrokerConfig
    from strom.storage.log.producer_state import VerificationGuard

log = logging.getLogger("strom.groups")
T = TypeVar("T")


def group_config(c: BrokerConfig) -> GroupConfig:
    """The state machine's settings, from the broker's group.* and offset* configs."""
    return GroupConfig(
        initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=c.group_min_session_timeout_ms,
        max_session_timeout_ms=c.group_max_session_timeout_ms,
        max_size=c.group_max_size,
        offset_metadata_max_bytes=c.offset_metadata_max_bytes,
        offsets_retention_ms=c.offsets_retention_ms,
    )


def _new_uuid() -> str:
    return str(runtime.new_uuid())


class GroupDriver(CoordinatorHost):
    """Hosts `GroupCoordinator`: time, waiting, and its writes to `__consumer_offsets`."""

    def __init__(
        self,
        topic: CoordinatorTopic,
        config: GroupConfig,
        *,
        num_partitions: int,
        retention_check_interval_ms: int,
        clock: Callable[[], int],
        new_id: Callable[[], str] = _new_uuid,
    ) -> None:
        super().__init__(topic, clock)
        self.machine = GroupCoordinator(config, new_id)
        self._num_partitions = num_partitions
        self._retention_every = retention_check_interval_ms
        self.owned: set[int] = set()
        """`__consumer_offsets` partitions this node leads, their groups loaded: it coordinates
        exactly the groups that hash to them."""
        self.loading: dict[int, int] = {}
        """Partitions being loaded (COORDINATOR_LOAD_IN_PROGRESS) -> the load's id."""
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        """Transaction markers written to a partition while it loads: applied after the load
        (applying one the load already read is harmless)."""
        self._load_ids = itertools.count(1)
        self._verifications: dict[tuple[int, int], VerificationGuard] = {}
        """(producer id, epoch) -> the guard its TxnOffsetCommit was verified under, until
        its batch is appended (`txn_commit`)."""
        self._to_load, self._load_queue = trio.open_memory_channel[tuple[int, int]](math.inf)

    # --- start-up and the timer task ---------------------------------------------------------

    async def load(self) -> None:
        """Rebuild the groups of every partition this node leads (before the listeners
        accept); later leadership changes come through `follow`."""
        for partition in self.topic.partitions() or []:
            led = self.topic.leader(partition)
            if led is not None:
                loaded = await runtime.to_thread(read_partition, led[0])
                self.machine.load(loaded, self.now())
                self.owned.add(partition)
        log.info("loaded %d groups from %s", len(self.machine.groups), CONSUMER_OFFSETS)

    def follow(self) -> None:
        """Follow the leadership of `__consumer_offsets` (after each metadata change): load
        the groups of partitions this node now leads, unload those of partitions it stopped
        leading. An empty partition is ready at once; any other loads in the background
        (`run`), its groups answering COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        led = {p for p in self.topic.partitions() or [] if self.topic.leader(p) is not None}
        lost = (self.owned | set(self.loading)) - led
        if lost:
            self._unload(lost)
        for partition in sorted(led - self.owned - set(self.loading)):
            self._start_loading(partition)

    def _start_loading(self, partition: int) -> None:
        led = self.topic.leader(partition)
        if led is not None and led[0].log_end_offset <= led[0].log_start_offset:
            self.owned.add(partition)  # nothing to read: e.g. a just-created partition
            return
        load_id = self.loading[partition] = next(self._load_ids)
        self._to_load.send_nowait((partition, load_id))

    def _unload(self, lost: set[int]) -> None:
        self.owned -= lost
        for partition in lost:
            self.loading.pop(partition, None)
            self._markers_while_loading.pop(partition, None)
        dropped = self.machine.unload(
            self.now(), lambda group_id: partition_for(group_id, self._num_partitions) in lost
        )
        self._settle()  # answers their parked requests NOT_COORDINATOR
        log.info(
            "no longer leading %s partitions %s: unloaded %d groups",
            CONSUMER_OFFSETS, sorted(lost), len(dropped),
        )  # fmt: skip

    async def _loader(self) -> None:
        """Load newly led partitions, one at a time, off the event loop."""
        async for partition, load_id in self._load_queue:
            led = self.topic.leader(partition)
            if self.loading.get(partition) != load_id or led is None:
                continue  # lost (and maybe regained: a later load) meanwhile
            loaded = await runtime.to_thread(read_partition, led[0])
            if self.loading.get(partition) != load_id:
                continue
            del self.loading[partition]
            self.machine.load(loaded, self.now())
            self.owned.add(partition)
            for producer_id, commit in self._markers_while_loading.pop(partition, []):
                self.complete_transaction(partition, producer_id, commit)
            self._settle()
            log.info("loaded %s-%d: now coordinating its groups", CONSUMER_OFFSETS, partition)

    async def _background(self, nursery: trio.Nursery) -> None:
        """Load newly led partitions, fire the state machine's deadlines and expire offsets."""
        nursery.start_soon(self._loader)
        await self._timer()

    def _write_completed(self, token: int, error: ErrorCode) -> None:
        self.machine.write_completed(self.now(), token, error)

    async def _timer(self) -> None:
        next_retention = self.now() + self._retention_every
        while True:
            deadline = self.machine.next_deadline()
            wake = next_retention if deadline is None else min(deadline, next_retention)
            self._kick = trio.Event()
            with trio.move_on_after(max(0, wake - self.now()) / 1000):
                await self._kick.wait()
            now = self.now()
            if now >= next_retention:
                expired = self.machine.expire_offsets(now)
                if expired:
                    log.info("expiring %d committed offsets", expired)
                next_retention = now + self._retention_every
            self._settle()

    # --- requests -----------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition holding the group (its coordinator leads it)."""
        return partition_for(group_id, self._num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE if this node coordinates `group_id` (it leads the group's partition and has
        loaded it), COORDINATOR_LOAD_IN_PROGRESS while it loads, else NOT_COORDINATOR (the
        client looks the coordinator up again), as Kafka's coordinator answers."""
        if not group_id and not self._closed:
            return ErrorCode.NONE  # the state machine answers INVALID_GROUP_ID, as Kafka first
        return self._partition_error(partition_for(group_id, self._num_partitions))

    async def join(self, req: JoinRequest) -> JoinResult:
        error = await self.ready(req.group_id)
        if error:
            return JoinResult(error, member_id=req.member_id)
        return await self._request(
            partial(self.machine.join, req=req),
            lambda error: JoinResult(error, member_id=req.member_id),
        )

    async def sync(self, req: SyncRequest) -> SyncResult:
        error = await self.ready(req.group_id)
        if error:
            return SyncResult(error)
        return await self._request(partial(self.machine.sync, req=req), SyncResult)

    async def commit(self, req: CommitRequest) -> dict[PartitionKey, ErrorCode]:
        """OffsetCommit, answered once the offsets are written (call `ready` first)."""
        keys = [(p.topic, p.partition) for p in req.partitions]
        result = await self._request(
            partial(self.machine.commit, req=req),
            lambda error: CommitResult(dict.fromkeys(keys, error)),
        )
        return result.errors

    async def txn_commit(
        self, req: TxnCommitRequest, verification: VerificationGuard | None = None
    ) -> dict[PartitionKey, ErrorCode]:
        """TxnOffsetCommit, answered once the transaction's offsets are written (call `ready`
        and verify the transaction first); they count once its COMMIT marker is written.

        `verification`: the group partition's guard the transaction was verified under
        (`PartitionLog.start_verification`). The batch is appended under it, so a
        verification answered before the transaction's marker reached the partition cannot
        let the offsets in after it (INVALID_TXN_STATE), where they would open a transaction
        nobody ends (KIP-890's ABA race, closed as for a produce)."""
        keys = [(p.topic, p.partition) for p in req.partitions]
        producer = (req.producer_id, req.producer_epoch)
        if verification is not None:
            self._verifications[producer] = verification
        try:
            result = await self._request(
                partial(self.machine.txn_commit, req=req),
                lambda error: CommitResult(dict.fromkeys(keys, error)),
            )
        finally:
            if verification is not None and self._verifications.get(producer) is verification:
                del self._verifications[producer]
        return result.errors

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> int:
        """A COMMIT/ABORT marker of `producer_id` is now committed in `__consumer_offsets`
        partition `partition` (WriteTxnMarkers): the producer's transactional offsets of that
        partition's groups become visible or are dropped. Returns how many were committed."""
        if partition in self.loading:  # the load may have read the log before the marker
            self._markers_while_loading.setdefault(partition, []).append((producer_id, commit))
            return 0
        if partition not in self.owned:
            return 0  # not led here: the next leader replays the marker from the log
        return self.run_sync(
            lambda: self.machine.complete_transaction(
                producer_id,
                commit,
                lambda group_id: partition_for(group_id, self._num_partitions) == partition,
            )
        )

    async def delete_offsets(
        self, group_id: str, partitions: list[PartitionKey]
    ) -> OffsetDeleteResult:
        """OffsetDelete, answered once the tombstones are written (call `ready` first)."""
        return await self._request(
            partial(self.machine.delete_offsets, group_id=group_id, partitions=partitions),
            OffsetDeleteResult,
        )

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """DeleteGroups, each group answered once its tombstones are written."""
        results = {}
        for group_id in group_ids:
            error = self.coordinator_error(group_id)
            if error:
                results[group_id] = error
                continue
            results[group_id] = await self._request(
                partial(self.machine.delete_group, group_id=group_id), ErrorCode
            )
        return results

    def run_sync(self, fn: Callable[[], T]) -> T:
        """Run a state-machine call that never parks, then settle whatever it set off."""
        try:
            return fn()
        finally:
            self._settle()

    # --- internals ----------------------------------------------------------------------------

    def _settle(self) -> None:
        """Fire due deadlines, write what the machine emitted, release replies, re-arm."""
        self.machine.tick(self.now())
        writes = self.machine.take_writes()
        while writes:
            for write in writes:
                self._appended(write.token, self._append(write))
            writes = self.machine.take_writes()
        self._release(self.machine.take_replies())

    def _append(self, write: Write) -> ErrorCode | Replicated:
        """Append one batch to the group's partition: NONE once committed, a wait for the ISR,
        or why it was not written."""
        index = partition_for(write.group_id, self._num_partitions)
        if self.topic.leader(index) is None:
            if index in (self.topic.partitions() or []):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        now = self.now()
        records = [Record(k, v, timestamp=now) for k, v in write.records]
        guard = None
        if write.producer is None:
            batch = build_batch(records)
        else:  # a transaction's offsets: its transactional batch, as Kafka's coordinator writes
            producer_id, producer_epoch = write.producer
            batch = build_batch(
                records, producer_id=producer_id, producer_epoch=producer_epoch, transactional=True
            )
            guard = self._verifications.pop(write.producer, None)
        if guard is None:
            outcome = self.topic.append(index, batch, now)
        else:
            outcome = self.topic.append(index, batch, now, verification=guard)
        if isinstance(outcome, ErrorCode) and outcome in (
            ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_EPOCH
        ):
            log.info(
                "group %s: transactional offsets of producer %s refused: %s",
                write.group_id, write.producer, outcome.name,
            )  # fmt: skip
        elif isinstance(outcome, ErrorCode) and outcome != ErrorCode.NONE:
            log.error(
                "group %s: append to %s-%d failed: %s",
                write.group_id, CONSUMER_OFFSETS, index, outcome.name,
            )  # fmt: skip
        return outcome
