"""Follower side of replication: copy each followed partition from its leader (Kafka's
ReplicaFetcherThread).

One task per source leader broker fetches every partition this broker follows from it, over the
leader's inter-broker listener (`inter.broker.listener.name`, the endpoint its registration in
the metadata image lists), on one `PeerConnection`. Each round is one Fetch at the latest
version naming this replica (`replica_state`: node id and broker epoch) and per partition the
leader epoch it believes current (fencing: a stale leader answers FENCED_LEADER_EPOCH or
UNKNOWN_LEADER_EPOCH), the local log end as fetch offset and the local latest epoch as
`last_fetched_epoch`. The leader parks it up to `replica.fetch.wait.max.ms`; an append wakes it.

Fetch sessions (KIP-227, Kafka's FetchSessionHandler): the first Fetch names every partition
(epoch 0) and the leader answers with a session id; later ones carry the id and the next
epoch and name only the partitions whose fetch state changed (appended to, truncated, newly
followed or back from a backoff), with the ones no longer fetched as forgotten, and the leader
answers only partitions with news. So a round costs what changed, not the number of
partitions followed. The changed partitions are tracked as they change; every
FULL_COMPARE_S the whole state is compared too (the local log start also moves by retention
here). A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...), a lost
connection, or a leader without room for a session (id 0) means a full Fetch next.

Per partition in the answer:

- records: appended as they came (`PartitionLog.append_replicated`): batches move as opaque
  bytes, the leader's offsets, epochs and timestamps kept; no record is decoded here.
  The follower's high watermark becomes min(leader's high watermark, local log end), and its
  log start follows the leader's `log_start_offset` up to that high watermark (so DeleteRecords
  and retention on the leader reach every replica); consumers parked on this follower
  (KIP-392) are woken.
- `diverging_epoch`: the local tail parts from the leader's history; truncate where
  `divergence.truncation_point` says and fetch again (a second round may cut further).
  Truncations go through `LogManager.truncate_to`, which rewrites the checkpoints at once.
- OFFSET_OUT_OF_RANGE: the leader cannot place the fetch offset. Ask it (ListOffsets as this
  replica) for its log end: a longer local log is cut to it; a local log that ends before the
  leader's log start restarts empty there (Kafka's fetchOffsetAndTruncate).
- NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, storage errors: the
  partition waits `replica.fetch.backoff.ms` (or the next metadata image) and is tried again.

A response is applied only to partitions still followed from that leader in the epoch the
request named: a metadata change during the round makes its answer moot for them. A failed
connection backs the whole task off `replica.fetch.backoff.ms` or until the next change.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import trio

from strom.broker import runtime
from strom.broker.drivers.peer import PeerConnection, PeerUnavailable
from strom.broker.replication.divergence import truncation_point
from strom.broker.security.peer import PeerSecurity
from strom.config.quorum import Address
from strom.storage import KafkaStorageError, LogError
from strom.wire.errors import ErrorCode
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

if TYPE_CHECKING:
    import uuid

    from strom.broker.core_state import BrokerCore
    from strom.storage.log.partition import PartitionLog

log = logging.getLogger("strom.fetcher")

FETCH_VERSION = FetchRequest.MAX_VERSION
LIST_OFFSETS_VERSION = 7
LATEST, EARLIEST = -1, -2
_RETRIABLE = (
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.KAFKA_STORAGE_ERROR,
)


Key = tuple[str, int]
PartitionState = tuple["uuid.UUID", int, int, int, int]
"""What a Fetch says of a partition: topic id, current leader epoch, fetch offset, last
fetched epoch, log start offset."""
FULL_COMPARE_S = 10.0
_SESSION_ERRORS = (
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
    ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
)


@dataclass
class _Session:
    """The follower's side of its fetch session with one leader."""

    id: int = 0
    epoch: int = 0
    """The next request's epoch: 0 (INITIAL) asks for a new session with a full Fetch."""
    sent: dict[Key, PartitionState] = field(default_factory=dict)
    """What the leader's session holds for each partition."""
    changed: set[Key] = field(default_factory=set)
    """Partitions whose state may differ from `sent` (appended, truncated, back from backoff)."""
    compared: float = 0.0
    """trio time of the last full comparison."""

    def reset(self) -> None:
        self.id, self.epoch = 0, 0
        self.sent.clear()
        self.changed.clear()


@dataclass(frozen=True)
class FetchTarget:
    """A partition this broker follows: fetched from `leader` in `leader_epoch`."""

    topic_id: uuid.UUID
    leader: int
    leader_epoch: int


class Followed(Protocol):
    """What the fetchers read of the `ReplicationManager`: the partitions to follow."""

    broker: BrokerCore
    targets: dict[Key, FetchTarget]
    targets_changed: trio.Event
    high_watermark_listeners: list[Callable[[str, int], None]]


class FetcherManager:
    """One `LeaderFetcher` task per leader broker that this broker follows partitions from."""

    def __init__(self, manager: Followed) -> None:
        self.manager = manager
        self.fetchers: dict[int, LeaderFetcher] = {}

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                changed = self.manager.targets_changed
                for leader in {t.leader for t in self.manager.targets.values()}:
                    if leader not in self.fetchers:
                        fetcher = self.fetchers[leader] = LeaderFetcher(self.manager, leader)
                        nursery.start_soon(fetcher.run)
                await changed.wait()

    async def aclose(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.connection_close()


class LeaderFetcher:
    """Fetches, from broker `leader`, every partition this broker follows it for."""

    def __init__(self, manager: Followed, leader: int) -> None:
        self.manager = manager
        self.broker = manager.broker
        self.leader = leader
        self._connection: PeerConnection | None = None
        self._correlation = itertools.count(1)
        self._delayed: dict[Key, float] = {}
        """Partitions backing off after an error: key -> trio time to try again."""
        self._failing = False
        """The last fetch got no answer (its failure was logged)."""
        self._session = _Session()
        self._mine_of: dict[Key, FetchTarget] | None = None
        self._mine_cache: dict[Key, FetchTarget] = {}
        self._names: dict[uuid.UUID, str] = {}
        """Topic id -> name of the partitions followed from this leader (answers carry ids)."""

    def _mine(self) -> dict[Key, FetchTarget]:
        """The partitions followed from this leader (recomputed when the targets change)."""
        targets = self.manager.targets
        if targets is not self._mine_of:
            self._mine_of = targets
            self._mine_cache = {k: t for k, t in targets.items() if t.leader == self.leader}
            self._names = {t.topic_id: k[0] for k, t in self._mine_cache.items()}
            self._session.compared = float("-inf")  # compare every partition next round
        return self._mine_cache

    def _fetched_now(self, now: float) -> dict[Key, FetchTarget]:
        """This round's partitions: those not backing off. A partition whose backoff ended is
        changed for the session (it was forgotten while it backed off)."""
        mine = self._mine()
        if not self._delayed:
            return mine
        for key, until in list(self._delayed.items()):
            if until <= now:
                del self._delayed[key]
                self._session.changed.add(key)
        return {k: t for k, t in mine.items() if k not in self._delayed}

    def _address(self) -> Address | None:
        registration = self.broker.image.broker(self.leader)
        if registration is None:
            return None
        endpoint = registration.endpoint(self.broker.config.inter_broker_listener)
        return None if endpoint is None else Address(endpoint.host, endpoint.port)

    def _connect(self, address: Address) -> PeerConnection:
        if self._connection is None or self._connection.address != address:
            config = self.broker.config
            self._connection = PeerConnection(
                address,
                f"broker-{config.node_id}-fetcher",
                PeerSecurity.to_brokers(config),
            )
        return self._connection

    async def connection_close(self) -> None:
        if self._connection is not None:
            await self._connection.aclose()

    async def run(self) -> None:
        backoff_s = self.broker.config.replica_fetch_backoff_ms / 1000
        while True:
            changed = self.manager.targets_changed
            now = trio.current_time()
            targets = self._fetched_now(now)
            address = self._address()
            if targets and address is None and not self._failing:
                log.warning(
                    "broker %d has no %s endpoint in the metadata; cannot fetch %d partitions "
                    "from it (check inter.broker.listener.name on every broker)",
                    self.leader, self.broker.config.inter_broker_listener, len(targets),
                )  # fmt: skip
                self._failing = True
            if not targets or address is None:
                # the delays of the partitions followed from this leader now (an expired delay
                # of one followed elsewhere since would wake this loop at once, over and over)
                mine = self._mine()
                wake = min((self._delayed[k] for k in mine if k in self._delayed), default=None)
                if address is None and targets:  # its registration may change: look again
                    wake = now + backoff_s
                with trio.move_on_at(wake if wake is not None else now + 3600):
                    await changed.wait()
                continue
            request = self._request(targets, now)
            try:
                response = await self._connect(address).request(
                    request, FETCH_VERSION, next(self._correlation), self._timeout_s()
                )
            except PeerUnavailable as exc:
                self._session.reset()  # the leader's session state is unknown
                # once per outage at INFO (a dead leader is retried every backoff until the
                # controller moves its partitions), then at DEBUG
                log.log(
                    logging.DEBUG if self._failing else logging.INFO,
                    "fetch from broker %d failed: %s; retrying every %d ms",
                    self.leader, exc, self.broker.config.replica_fetch_backoff_ms,
                )  # fmt: skip
                self._failing = True
                with trio.move_on_after(backoff_s):
                    await changed.wait()
                continue
            self._failing = False
            assert isinstance(response, FetchResponse)
            if response.error_code in _SESSION_ERRORS:
                log.debug("fetch session with broker %d: %s; starting a new one", self.leader,
                          ErrorCode(response.error_code).name)  # fmt: skip
                self._session.reset()
                continue
            if response.error_code != ErrorCode.NONE:
                self._session.reset()
                log.info(
                    "fetch from broker %d: %s", self.leader, ErrorCode(response.error_code).name
                )
                with trio.move_on_after(backoff_s):
                    await changed.wait()
                continue
            self._answered(request, response)
            await self._apply(targets, response, address)

    def _timeout_s(self) -> float:
        config = self.broker.config
        return (
            config.replica_fetch_wait_max_ms + config.controller_quorum_request_timeout_ms
        ) / 1000

    def _answered(self, request: FetchRequest, response: FetchResponse) -> None:
        """The session after an answer without error: a full Fetch's answer names the new
        session (0: the leader had no room, the next Fetch is full again); an incremental
        one moves to the next epoch."""
        session = self._session
        if request.session_epoch == 0:
            session.id = response.session_id
            session.epoch = 1 if response.session_id else 0
            if not response.session_id:
                session.sent.clear()
        else:
            session.epoch = 1 if session.epoch >= 2**31 - 1 else session.epoch + 1

    def _state(self, key: Key, target: FetchTarget) -> PartitionState | None:
        plog = self.broker.logs.get(*key)
        if plog is None:
            return None
        epoch = plog.latest_epoch()
        return (
            target.topic_id, target.leader_epoch, plog.log_end_offset,
            -1 if epoch is None else epoch, plog.log_start_offset,
        )  # fmt: skip

    def _request(self, targets: dict[Key, FetchTarget], now: float) -> FetchRequest:
        """A full Fetch (no session yet), or an incremental one naming what changed."""
        session = self._session
        include: dict[Key, PartitionState] = {}
        forgotten: list[Key] = []  # in the leader's session, no longer fetched
        if session.id == 0 or now - session.compared >= FULL_COMPARE_S:
            session.compared = now
            for key, target in targets.items():
                state = self._state(key, target)
                if state is not None and (session.id == 0 or session.sent.get(key) != state):
                    include[key] = state
            forgotten = [key for key in session.sent if key not in targets]
        else:
            for key in session.changed:
                wanted = targets.get(key)
                state = None if wanted is None else self._state(key, wanted)
                if state is None:
                    if key in session.sent:
                        forgotten.append(key)
                elif session.sent.get(key) != state:
                    include[key] = state
        session.changed.clear()
        if session.id == 0:
            session.sent = dict(include)
            return self._fetch(include, [])
        gone = [(key, session.sent.pop(key)[0]) for key in forgotten]
        session.sent.update(include)
        return self._fetch(include, gone)

    def _fetch(
        self, include: dict[Key, PartitionState], forgotten: list[tuple[Key, uuid.UUID]]
    ) -> FetchRequest:
        config = self.broker.config
        session = self._session
        topics: dict[str, FetchRequest.FetchTopic] = {}
        for (name, index), (topic_id, leader_epoch, offset, last_epoch, start) in include.items():
            topic = topics.get(name)
            if topic is None:
                topic = topics[name] = FetchRequest.FetchTopic(name, topic_id)
            topic.partitions.append(
                FetchRequest.FetchPartition(
                    partition=index,
                    current_leader_epoch=leader_epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=last_epoch,
                    log_start_offset=start,
                    partition_max_bytes=config.replica_fetch_max_bytes,
                )
            )
        gone: dict[str, FetchRequest.ForgottenTopic] = {}
        for (name, index), topic_id in forgotten:
            entry = gone.get(name)
            if entry is None:
                entry = gone[name] = FetchRequest.ForgottenTopic(name, topic_id, [])
            entry.partitions.append(index)
        return FetchRequest(
            replica_id=-1,
            replica_state=FetchRequest.ReplicaState(
                self.broker.node_id, self.broker.controller.broker_epoch
            ),
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes,
            session_id=session.id,
            session_epoch=session.epoch,
            topics=list(topics.values()),
            forgotten_topics_data=list(gone.values()),
        )

    async def _apply(
        self, sent: dict[Key, FetchTarget], response: FetchResponse, address: Address
    ) -> None:
        backoff_s = self.broker.config.replica_fetch_backoff_ms / 1000
        owed: list[PartitionLog] = []
        cut: list[Key] = []  # truncated, their directories' checkpoints owed (one write for all)
        for topic in response.responses:
            # `_names` is of this leader's partitions now: `sent` may name fewer (not more)
            name = topic.topic or self._names.get(topic.topic_id, "")
            for p in topic.partitions:
                key = (name, p.partition_index)
                target = sent.get(key)
                if target is None:
                    continue
                # the image as it is now: an out-of-range partition above waited for its leader
                current = self.manager.targets.get(key)
                if current is not target and current != target:
                    continue  # no longer followed from this leader in this epoch
                plog = self.broker.logs.get(*key)
                if plog is None:
                    continue
                self._session.changed.add(key)  # its fetch state may move below
                try:
                    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        self._checkpoint_cuts(cut)  # before anything else may run
                        await self._out_of_range(key, target, address)
                    elif p.error_code != ErrorCode.NONE:
                        if p.error_code not in _RETRIABLE:
                            log.warning(
                                "fetch of %s from broker %d: %s", plog.name, self.leader,
                                ErrorCode(p.error_code).name,
                            )  # fmt: skip
                        self._delayed[key] = trio.current_time() + backoff_s
                    elif p.diverging_epoch.epoch >= 0 or p.diverging_epoch.end_offset >= 0:
                        point = truncation_point(
                            plog, p.diverging_epoch.epoch, p.diverging_epoch.end_offset
                        )
                        log.info(
                            "%s diverges from leader %d (epoch %d ends at %d): truncating to %d",
                            plog.name, self.leader, p.diverging_epoch.epoch,
                            p.diverging_epoch.end_offset, point.offset,
                        )  # fmt: skip
                        self.broker.logs.truncate_to(*key, point.offset, checkpoint=False)
                        cut.append(key)
                    else:
                        before = (plog.high_watermark, plog.log_start_offset)
                        records = p.records
                        if isinstance(records, bytes | bytearray | memoryview) and len(records):
                            plog.append_replicated(records, self.broker.clock())
                            if plog.flush_owed():
                                owed.append(plog)
                        plog.update_high_watermark(min(p.high_watermark, plog.log_end_offset))
                        self._follow_log_start(plog, p.log_start_offset)
                        self._delayed.pop(key, None)
                        if (plog.high_watermark, plog.log_start_offset) != before:
                            for listener in self.manager.high_watermark_listeners:
                                listener(*key)  # consumers reading this follower (KIP-392)
                except (LogError, OSError) as exc:
                    log.warning("replicating %s from broker %d: %s", plog.name, self.leader, exc)
                    self._delayed[key] = trio.current_time() + backoff_s
        self._checkpoint_cuts(cut)
        # flush.messages: flushed before the next fetch tells the leader this replica holds
        # them (so acks=all with flush.messages=1 means synced on every ISR member, as Kafka)
        for plog in owed:
            try:
                await runtime.to_thread(plog.flush)
            except KafkaStorageError as exc:  # offline now; the storage heartbeat reports it
                log.warning("flushing %s: %s", plog.name, exc)

    def _checkpoint_cuts(self, cut: list[Key]) -> None:
        """Persist the checkpoints that truncations in `cut` owe, once per directory, and empty
        it; before the next schedule point (nothing may be written past a new end first)."""
        if not cut:
            return
        try:
            self.broker.logs.checkpoint_partitions(cut)
        except OSError as exc:
            log.warning("checkpointing %d truncated partitions from broker %d: %s",
                        len(cut), self.leader, exc)  # fmt: skip
            retry = trio.current_time() + self.broker.config.replica_fetch_backoff_ms / 1000
            for key in cut:
                self._delayed[key] = retry
        cut.clear()

    def _follow_log_start(self, plog: PartitionLog, leader_start: int) -> None:
        """Advance the local log start to the leader's (DeleteRecords, retention there), never
        past the local high watermark: what is not committed here stays until it is."""
        start = min(leader_start, plog.high_watermark)
        if start > plog.log_start_offset:
            log.debug("%s: log start follows leader %d to %d", plog.name, self.leader, start)
            plog.delete_records_before(start)

    async def _out_of_range(self, key: Key, target: FetchTarget, address: Address) -> None:
        """Kafka's fetchOffsetAndTruncate: cut to the leader's end, or restart at its start."""
        plog = self.broker.logs.get(*key)
        if plog is None:
            return
        leader_end = await self._leader_offset(key, target, LATEST, address)
        if leader_end is None:
            self._delayed[key] = (
                trio.current_time() + self.broker.config.replica_fetch_backoff_ms / 1000
            )
            return
        if leader_end < plog.log_end_offset:
            log.info("%s: leader %d ends at %d; truncating", plog.name, self.leader, leader_end)
            self.broker.logs.truncate_to(*key, leader_end)
            return
        leader_start = await self._leader_offset(key, target, EARLIEST, address)
        if leader_start is None:
            return
        if leader_start > plog.log_end_offset:
            log.info("%s: leader %d starts at %d; restarting there", plog.name, self.leader,
                     leader_start)  # fmt: skip
            plog.truncate_fully_and_start_at(leader_start)
            return
        # The leader cannot place our last epoch although our offset is within its log: keep
        # what its high watermark says is committed and fetch again, after a backoff.
        log.warning(
            "%s: leader %d cannot place epoch %s at offset %d; truncating to the high watermark %d",
            plog.name, self.leader, plog.latest_epoch(), plog.log_end_offset, plog.high_watermark,
        )  # fmt: skip
        self.broker.logs.truncate_to(*key, plog.high_watermark)
        self._delayed[key] = (
            trio.current_time() + self.broker.config.replica_fetch_backoff_ms / 1000
        )

    async def _leader_offset(
        self, key: Key, target: FetchTarget, timestamp: int, address: Address
    ) -> int | None:
        request = ListOffsetsRequest(
            replica_id=self.broker.node_id,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    key[0],
                    [
                        ListOffsetsRequest.ListOffsetsPartition(
                            key[1], target.leader_epoch, timestamp
                        )
                    ],
                )
            ],
        )
        try:
            response = await self._connect(address).request(
                request, LIST_OFFSETS_VERSION, next(self._correlation), self._timeout_s()
            )
        except PeerUnavailable:
            return None
        assert isinstance(response, ListOffsetsResponse)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.NONE:
                    return int(p.offset)
        return None
