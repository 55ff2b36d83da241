"""Follower side of replication: copy each followed partition from its leader (Kafka's
ReplicaFetcherThread).

One task per source leader broker fetches every partition this broker follows from it, over the
leader's inter-broker listener (`inter.broker.listener.name`, the endpoint its registration in
the metadata image lists), on one `PeerConnection`. Each round is one Fetch at the latest
version, sessionless, naming this replica (`replica_state`: node id and broker epoch) and per
partition the leader epoch it believes current (fencing: a stale leader answers
FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH), the local log end as fetch offset and the local
latest epoch as `last_fetched_epoch`. The leader parks it up to `replica.fetch.wait.max.ms`.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import trio

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

    def _mine(self) -> dict[Key, FetchTarget]:
        return {k: t for k, t in self.manager.targets.items() if t.leader == self.leader}

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
            targets = {k: t for k, t in self._mine().items() if self._delayed.get(k, 0) <= now}
            address = self._address()
            if targets and address is None and not self._failing:
                log.warning(
                    "broker %d has no %s endpoint in the metadata; cannot fetch %d partitions "
                    "from it (check inter.broker.listener.name on every broker)",
                    self.leader, self.broker.config.inter_broker_listener, len(targets),
                )  # fmt: skip
                self._failing = True
            if not targets or address is None:
                wake = min(self._delayed.values(), default=None) if self._mine() else None
                if address is None and targets:  # its registration may change: look again
                    wake = now + backoff_s
                with trio.move_on_at(wake if wake is not None else now + 3600):
                    await changed.wait()
                continue
            request = self._request(targets)
            try:
                response = await self._connect(address).request(
                    request, FETCH_VERSION, next(self._correlation), self._timeout_s()
                )
            except PeerUnavailable as exc:
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
            if response.error_code != ErrorCode.NONE:
                log.info(
                    "fetch from broker %d: %s", self.leader, ErrorCode(response.error_code).name
                )
                with trio.move_on_after(backoff_s):
                    await changed.wait()
                continue
            await self._apply(targets, response, address)

    def _timeout_s(self) -> float:
        config = self.broker.config
        return (
            config.replica_fetch_wait_max_ms + config.controller_quorum_request_timeout_ms
        ) / 1000

    def _request(self, targets: dict[Key, FetchTarget]) -> FetchRequest:
        config = self.broker.config
        topics: dict[str, FetchRequest.FetchTopic] = {}
        for (name, index), target in targets.items():
            plog = self.broker.logs.get(name, index)
            if plog is None:
                continue
            epoch = plog.latest_epoch()
            topic = topics.setdefault(name, FetchRequest.FetchTopic(name, target.topic_id))
            topic.partitions.append(
                FetchRequest.FetchPartition(
                    partition=index,
                    current_leader_epoch=target.leader_epoch,
                    fetch_offset=plog.log_end_offset,
                    last_fetched_epoch=-1 if epoch is None else epoch,
                    log_start_offset=plog.log_start_offset,
                    partition_max_bytes=config.replica_fetch_max_bytes,
                )
            )
        return FetchRequest(
            replica_id=-1,
            replica_state=FetchRequest.ReplicaState(
                self.broker.node_id, self.broker.controller.broker_epoch
            ),
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes,
            session_id=0,
            session_epoch=-1,
            topics=list(topics.values()),
        )

    async def _apply(
        self, sent: dict[Key, FetchTarget], response: FetchResponse, address: Address
    ) -> None:
        by_id = {t.topic_id: k[0] for k, t in sent.items()}
        backoff_s = self.broker.config.replica_fetch_backoff_ms / 1000
        owed: list[PartitionLog] = []
        for topic in response.responses:
            name = topic.topic or by_id.get(topic.topic_id, "")
            for p in topic.partitions:
                key = (name, p.partition_index)
                target = sent.get(key)
                if target is None or self.manager.targets.get(key) != target:
                    continue  # no longer followed from this leader in this epoch
                plog = self.broker.logs.get(*key)
                if plog is None:
                    continue
                try:
                    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        await self._out_of_range(key, target, address)
                    elif p.error_code != ErrorCode.NONE:
                        if p.error_code not in _RETRIABLE:
                            log.warning(
                                "fetch of %s from broker %d: %s", plog.name, self.leader,
                                ErrorCode(p.error_code).name,
                            )  # fmt: skip
                        self._delayed[key] = trio.current_time() + backoff_s
                    elif p.diverging_epoch.epoch >= 0 or p.diverging_epoch.end_offset >= 0:
                        cut = truncation_point(
                            plog, p.diverging_epoch.epoch, p.diverging_epoch.end_offset
                        )
                        log.info(
                            "%s diverges from leader %d (epoch %d ends at %d): truncating to %d",
                            plog.name, self.leader, p.diverging_epoch.epoch,
                            p.diverging_epoch.end_offset, cut.offset,
                        )  # fmt: skip
                        self.broker.logs.truncate_to(*key, cut.offset)
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
        # flush.messages: flushed before the next fetch tells the leader this replica holds
        # them (so acks=all with flush.messages=1 means synced on every ISR member, as Kafka)
        for plog in owed:
            try:
                await trio.to_thread.run_sync(plog.flush)
            except KafkaStorageError as exc:  # offline now; the storage heartbeat reports it
                log.warning("flushing %s: %s", plog.name, exc)

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
