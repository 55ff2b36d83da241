"""`GroupDriver`: the trio shell around `GroupCoordinator`.

It owns everything the state machine may not: the clock, uuids, the
`__consumer_offsets` topic (created through the controller on first use) and
its logs, and the waiting. JoinGroup and SyncGroup responses the state machine
parks wait on a trio Event until a later request or a timer releases them; a
single timer task sleeps until the machine's next deadline (or until a request
moves it) and calls `tick`. Records are appended synchronously on the event
loop thread, so a commit is in the log before its response is built. On
shutdown every parked response is released with NOT_COORDINATOR, as a Kafka
coordinator that resigns does.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import trio

from strom.broker.admin.topics import CONSUMER_OFFSETS
from strom.broker.drivers.group_loading import read_partition
from strom.coordinator.groups.api import (
    GroupConfig,
    JoinRequest,
    JoinResult,
    KeyValue,
    SyncRequest,
    SyncResult,
)
from strom.coordinator.groups.coordinator import GroupCoordinator
from strom.coordinator.groups.records import partition_for
from strom.storage import AppendOrigin, LogAppendError
from strom.wire.errors import ErrorCode
from strom.wire.records import Record, build_batch

if TYPE_CHECKING:
    from strom.broker.state import BrokerState

log = logging.getLogger("strom.groups")
T = TypeVar("T")
R = TypeVar("R", JoinResult, SyncResult)
CREATE_TOPICS_VERSION = 7


def group_config(state: BrokerState) -> GroupConfig:
    c = state.config
    return GroupConfig(
        initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=c.group_min_session_timeout_ms,
        max_session_timeout_ms=c.group_max_session_timeout_ms,
        max_size=c.group_max_size,
        offset_metadata_max_bytes=c.offset_metadata_max_bytes,
        offsets_retention_ms=c.offsets_retention_minutes * 60_000,
    )


async def create_internal_topic(
    state: BrokerState, name: str, partitions: int, replication: int, configs: dict[str, str]
) -> ErrorCode:
    """Create an internal topic through the controller; NONE if it exists (or now does)."""
    if state.image.topic(name) is not None:
        return ErrorCode.NONE
    from strom.wire.messages.create_topics import (
        CreateTopicsRequest,  # once per topic: not at start-up
    )

    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication,
                configs=[
                    CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in configs.items()
                ],
            )
        ],
        timeout_ms=30_000,
    )
    response = await state.controller.create_topics(request, CREATE_TOPICS_VERSION)
    error = ErrorCode(response.topics[0].error_code)
    if error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        log.error("could not create %s: %s %s", name, error.name, response.topics[0].error_message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


class GroupDriver:
    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.machine = GroupCoordinator(
            group_config(state), self._append, lambda: str(uuid.uuid4())
        )
        self._tokens = itertools.count(1)
        self._parked: dict[int, tuple[trio.Event, list[JoinResult | SyncResult]]] = {}
        self._kick = trio.Event()
        self._create_lock = trio.Lock()
        self._closed = False

    def now(self) -> int:
        return self.state.clock()

    # --- start-up and the timer task ---------------------------------------------------------

    async def load(self) -> None:
        """Rebuild every group from __consumer_offsets (before the listeners accept)."""
        topic = self.state.image.topic(CONSUMER_OFFSETS)
        if topic is None:
            return
        logs = [self.state.logs.get(CONSUMER_OFFSETS, p) for p in sorted(topic.partitions)]
        loaded = []
        for partition_log in logs:
            if partition_log is not None:
                loaded += await trio.to_thread.run_sync(read_partition, partition_log)
        self.machine.load(loaded, self.now())
        log.info("loaded %d groups from %s", len(self.machine.groups), CONSUMER_OFFSETS)

    async def run(self) -> None:
        """Fire the state machine's deadlines and expire offsets, until cancelled."""
        retention_every = self.state.config.offsets_retention_check_interval_ms
        next_retention = self.now() + retention_every
        try:
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
                        log.info("expired %d committed offsets", expired)
                    next_retention = now + retention_every
                self._settle()
        finally:
            self._closed = True
            for event, slot in self._parked.values():
                slot.append(JoinResult(ErrorCode.NOT_COORDINATOR))
                event.set()
            self._parked.clear()

    # --- requests -----------------------------------------------------------------------------

    async def ensure_topic(self) -> ErrorCode:
        """__consumer_offsets exists (created on first use, as Kafka does)."""
        if self.state.image.topic(CONSUMER_OFFSETS) is not None:
            return ErrorCode.NONE
        cfg = self.state.config
        async with self._create_lock:
            return await create_internal_topic(
                self.state,
                CONSUMER_OFFSETS,
                cfg.offsets_topic_num_partitions,
                cfg.offsets_topic_replication_factor,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(cfg.offsets_topic_segment_bytes),
                    "compression.type": "producer",
                },
            )

    async def join(self, req: JoinRequest) -> JoinResult:
        error = await self._ready()
        if error:
            return JoinResult(error, member_id=req.member_id)
        token = next(self._tokens)
        result = self._call(lambda: self.machine.join(self.now(), req, token), token)
        out = result if result is not None else await self._wait(token)
        assert isinstance(out, JoinResult)
        return out

    async def sync(self, req: SyncRequest) -> SyncResult:
        error = await self._ready()
        if error:
            return SyncResult(error)
        token = next(self._tokens)
        result = self._call(lambda: self.machine.sync(self.now(), req, token), token)
        out = result if result is not None else await self._wait(token)
        if isinstance(out, JoinResult):  # released at shutdown
            return SyncResult(out.error)
        return out

    def run_sync(self, fn: Callable[[], T]) -> T:
        """Run a non-parking state-machine call, then release whatever it freed."""
        try:
            return fn()
        finally:
            self._settle()

    async def ready(self) -> ErrorCode:
        return await self._ready()

    # --- internals ----------------------------------------------------------------------------

    async def _ready(self) -> ErrorCode:
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        return await self.ensure_topic()

    def _call(self, fn: Callable[[], R | None], token: int) -> R | None:
        self._parked[token] = (trio.Event(), [])
        try:
            result = fn()
        except BaseException:
            self._parked.pop(token, None)
            raise
        if result is not None:
            self._parked.pop(token, None)
        self._settle()
        return result

    async def _wait(self, token: int) -> JoinResult | SyncResult:
        entry = self._parked.get(token)
        if entry is None:
            return JoinResult(ErrorCode.NOT_COORDINATOR)
        event, slot = entry
        try:
            await event.wait()
        finally:
            self._parked.pop(token, None)
        return slot[0]

    def _settle(self) -> None:
        """Fire due deadlines (a zero initial delay completes at once), release replies, re-arm."""
        self.machine.tick(self.now())
        for token, result in self.machine.take_replies():
            entry = self._parked.get(token)
            if entry is not None and not entry[1]:
                entry[1].append(result)
                entry[0].set()
        self._kick.set()

    def _append(self, group_id: str, pairs: list[KeyValue]) -> ErrorCode:
        """Append one batch to the group's partition; Kafka's coordinator error mapping."""
        partitions = self.state.config.offsets_topic_num_partitions
        index = partition_for(group_id, partitions)
        partition_log = self.state.logs.get(CONSUMER_OFFSETS, index)
        image = self.state.image.partition(CONSUMER_OFFSETS, index)
        if partition_log is None or image is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        now = self.now()
        batch = build_batch([Record(k, v, timestamp=now) for k, v in pairs])
        try:
            partition_log.append(batch, image.leader_epoch, now, origin=AppendOrigin.COORDINATOR)
        except LogAppendError as exc:
            log.error(
                "group %s: append to %s-%d failed: %s", group_id, CONSUMER_OFFSETS, index, exc
            )
            if exc.error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                return exc.error
            if exc.error == ErrorCode.KAFKA_STORAGE_ERROR:
                return ErrorCode.NOT_COORDINATOR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE
