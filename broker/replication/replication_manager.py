"""`ReplicationManager`: this broker's part in replicating partition data (Kafka's ReplicaManager).

The metadata image says, for every partition with a replica here, who leads it and in which
leader epoch. After each image (`follow`, called by `follow_image`) the manager makes the
transitions Kafka's makeLeaders / makeFollowers make:

- **Became leader** (or a new leader epoch here): stop fetching the partition, start the epoch
  at the log end (`PartitionLog.start_leader_epoch`), and track the followers in a new
  `ReplicaSet`. A replicated partition's high watermark then moves only as the ISR catches up
  (`high_watermark_follows_appends` False); a single-replica partition keeps committing at
  append, with no `ReplicaSet` and no waiting anywhere (today's speed).
- **Stays leader**: the committed ISR of the image reaches the `ReplicaSet` (`committed`), and
  a changed replica set (a reassignment) its followers (`reassigned`: new replicas join the ISR
  through AlterPartition once caught up, which lets the controller complete the reassignment).
- **Elected uncleanly** (leader recovery state RECOVERING): the leader reports RECOVERED in an
  AlterPartition at once (KIP-704; there is no transaction state to recover yet).
- **Became or stays follower** of a new leader or epoch: the fetcher for that leader broker
  (`strom.broker.replication.fetcher`) takes the partition; divergence is settled on the first
  response (no truncation up front).
- **No leader**: nothing fetches it; its log stays as it is.

Leader side, per replica fetch (`follower_fetched`, from the Fetch handler): the follower's
fetch offset is its log end; the `ReplicaSet` may move the high watermark, which is then set
on the log and wakes parked consumer fetches and acks=all produces (`DataWaiters`: both park
there). A follower's fetch also carries its log start offset; when that moves the same
listeners are told, since the partition's low watermark (`low_watermark`, the smallest log
start of the live replicas) may have reached what a waiting DeleteRecords asked for. A
follower outside the ISR that caught up is proposed at once; lagging ISR members are
dropped by `isr_loop`, every `replica.lag.time.max.ms` / 2 (Kafka's ISR expiration schedule).
Proposals go to the active controller as AlterPartition (latest version) from one sender task,
batched, with the same retries as the broker's other controller requests
(`ActiveControllerClient`). What happens to a proposal follows Kafka's Partition and
AlterPartitionManager: an answer settles it; INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED (the
controller did not make the change) put it back to the committed ISR; no answer, a top-level
error or an unexpected partition error sends it again; the other partition errors
(FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...) leave it in flight until metadata with a
newer partition epoch settles it. While in flight the high watermark counts the proposed
members too, since the controller may already count them in the ISR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import trio

from strom.broker.admin.broker_nodes import broker_nodes
from strom.broker.drivers.controller_channel import ActiveControllerClient
from strom.broker.drivers.lifecycle import ControllerUnavailable
from strom.broker.replication.fetcher import FetcherManager, FetchTarget, Key
from strom.broker.replication.read_replica import (
    NO_PREFERRED_REPLICA,
    ReplicaView,
    select_read_replica,
)
from strom.broker.replication.replica_set import Proposal, ReplicaSet
from strom.config import topic_min_insync_replicas
from strom.config.planted import planted
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

if TYPE_CHECKING:
    import uuid

    from strom.broker.core_state import BrokerCore
    from strom.config.quorum import Address
    from strom.coordinator.metadata.image import MetadataImage, PartitionImage, TopicImage
    from strom.storage.log.partition import PartitionLog

log = logging.getLogger("strom.replication")

ALTER_PARTITION_VERSION = AlterPartitionRequest.MAX_VERSION
RECOVERED, RECOVERING = 0, 1
"""Leader recovery states (KIP-704): RECOVERING after an unclean election."""
ALTER_PARTITION_TIMEOUT_S = 30.0
"""How long one AlterPartition may retry across controller changes before it is sent anew."""
RESEND_AFTER_S = 0.05
"""Wait before sending a proposal again (Kafka's AlterPartitionManager: 50 ms)."""
RESET_ON = frozenset({ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED})
"""Partition errors after which the change was certainly not made: back to the committed ISR."""
WAIT_FOR_METADATA_ON = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST,
    ErrorCode.NEW_LEADER_ELECTED,
})  # fmt: skip
"""Partition errors after which the proposal stays in flight until the metadata settles it
(Kafka's handleAlterPartitionError); any other partition error is sent again."""


@dataclass
class Leadership:
    """A replicated partition this broker leads, in `leader_epoch`."""

    topic_id: uuid.UUID
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    log: PartitionLog
    replica_set: ReplicaSet


class QuietFetches(Protocol):
    """A follower's fetch session on this leader, as the ISR check sees it."""

    def quiet_since(self, key: Key, replica_id: int, broker_epoch: int | None) -> int:
        """When the session's latest fetch started, if `replica_id` in `broker_epoch` made it
        and the session watches `key` (so an unread `key` was quiet then); else -1."""
        ...


@dataclass
class _Outbox:
    """ISR proposals waiting for the sender: key -> (leadership, proposal)."""

    proposals: dict[Key, tuple[Leadership, Proposal]] = field(default_factory=dict)
    ready: trio.Event = field(default_factory=trio.Event)


class ReplicationManager:
    """See the module docstring; one per broker (`BrokerState.replication`)."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker
        self.leaders: dict[Key, Leadership] = {}
        """Replicated partitions led here (single-replica ones are not tracked)."""
        self.targets: dict[Key, FetchTarget] = {}
        """Partitions followed here, by the leader they fetch from."""
        self.targets_changed = trio.Event()
        self._outbox = _Outbox()
        self._client: ActiveControllerClient | None = None
        self.fetchers: FetcherManager | None = None
        self.serving_consumers: set[Key] = set()
        """Followed partitions whose consumers this follower served records (KIP-392); each is
        logged once while followed."""
        self.high_watermark_listeners: list[Callable[[str, int], None]] = []
        """Told when a led partition's high watermark or a follower's log start moved
        (DataWaiters wakes parked fetches, acks=all produces and DeleteRecords)."""
        self.follower_sessions: set[QuietFetches] = set()
        """The followers' fetch sessions on this leader, for the ISR check of the partitions
        they leave quiet (`strom.broker.data.follower_sessions`)."""

    # --- transitions -------------------------------------------------------------------------

    def follow(self, image: MetadataImage, topics: Set[str] | None = None) -> None:
        """Make the leader/follower transitions of `image` (see the module docstring), for
        every partition, or only those of `topics` (the others did not change: see
        `strom.broker.replication.partitions.touched_topics`)."""
        me = self.broker.node_id
        now = self.broker.clock()
        if topics is None:
            leaders: dict[Key, Leadership] = {}
            targets: dict[Key, FetchTarget] = {}
            scan = list(image.topics_by_name.values())
        else:
            leaders = {k: v for k, v in self.leaders.items() if k[0] not in topics}
            targets = {k: v for k, v in self.targets.items() if k[0] not in topics}
            scan = [t for name in topics if (t := image.topics_by_name.get(name)) is not None]
        effective = image.broker_config_layers(self.broker.config).effective()
        lag = effective.replica_lag_time_max_ms

        def strict_min_isr(topic: TopicImage) -> int:
            """The topic's min.insync.replicas when ELR is enabled (strict min ISR), else 0."""
            if not image.elr_enabled:
                return 0
            return topic_min_insync_replicas(effective, image.topic_config_overrides(topic.name))

        for topic in scan:
            for partition in topic.partitions.values():
                if me not in partition.replicas:
                    continue
                key = (topic.name, partition.partition_id)
                plog = self.broker.logs.get(*key)
                if plog is None:
                    continue
                if partition.leader == me:
                    if len(partition.replicas) == 1:
                        if not plog.high_watermark_follows_appends:
                            plog.start_leader_epoch(partition.leader_epoch)
                            plog.high_watermark_follows_appends = True
                            plog.update_high_watermark(plog.log_end_offset)
                        continue
                    plog.restore_high_watermark()
                    current = self.leaders.get(key)
                    if (
                        current is None
                        or current.leader_epoch != partition.leader_epoch
                        or current.log is not plog
                    ):
                        current = self._become_leader(
                            plog, topic.topic_id, partition, lag, now, strict_min_isr(topic)
                        )
                    else:
                        current.replica_set.min_isr = strict_min_isr(topic)
                        if partition.replicas != current.replicas:
                            current.replica_set.reassigned(partition.replicas)
                            current.replicas = partition.replicas
                        if partition.partition_epoch > current.partition_epoch:
                            # the controller changed the partition since the leader last
                            # knew it: that settles any proposal in flight
                            current.partition_epoch = partition.partition_epoch
                            current.replica_set.committed(partition.isr)
                    self._registrations(image, current)
                    # a smaller ISR (the controller fenced a follower) may commit more
                    self._advance(key, current)
                    leaders[key] = current
                    continue
                plog.high_watermark_follows_appends = False
                plog.restore_high_watermark()
                if partition.leader >= 0:
                    targets[key] = FetchTarget(
                        topic.topic_id, partition.leader, partition.leader_epoch
                    )
        self.leaders = leaders
        self.serving_consumers &= targets.keys()
        self.broker.followed = True
        if targets != self.targets:
            self.targets = targets
            self.targets_changed.set()
            self.targets_changed = trio.Event()

    def _become_leader(
        self,
        plog: PartitionLog,
        topic_id: uuid.UUID,
        partition: PartitionImage,
        lag_ms: int,
        now: int,
        min_isr: int = 0,
    ) -> Leadership:
        plog.start_leader_epoch(partition.leader_epoch)
        plog.high_watermark_follows_appends = False
        replica_set = ReplicaSet(
            self.broker.node_id,
            partition.replicas,
            partition.isr,
            high_watermark=plog.high_watermark,
            leader_epoch_start=plog.log_end_offset,
            lag_time_max_ms=lag_ms,
            now_ms=now,
        )
        replica_set.min_isr = min_isr
        log.info(
            "leading %s in epoch %d (replicas %s, isr %s, log end %d, high watermark %d)",
            plog.name, partition.leader_epoch, list(partition.replicas), list(partition.isr),
            plog.log_end_offset, plog.high_watermark,
        )  # fmt: skip
        leadership = Leadership(
            topic_id, partition.leader_epoch, partition.partition_epoch, partition.replicas, plog,
            replica_set,
        )  # fmt: skip
        key = (plog.topic, plog.partition)
        self._advance(key, leadership)
        if partition.leader_recovery_state == RECOVERING:
            # elected uncleanly: report RECOVERED at once (every AlterPartition this leader
            # sends says RECOVERED; there is no transaction state to recover yet)
            log.info("%s: elected uncleanly; reporting RECOVERED", plog.name)
            self._queue(key, leadership, replica_set.report())
        return leadership

    def _registrations(self, image: MetadataImage, leadership: Leadership) -> None:
        """Forget what earlier incarnations of the followers' brokers reported (KIP-903)."""
        if planted("isr-trusts-old-incarnation"):
            return
        for replica_id in leadership.replica_set.followers:
            registration = image.broker(replica_id)
            if registration is not None:
                leadership.replica_set.registered(replica_id, registration.epoch)

    # --- leader side -------------------------------------------------------------------------

    def follower_fetched(
        self,
        key: Key,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int = -1,
        broker_epoch: int = -1,
        quiet_since_ms: int = -1,
    ) -> None:
        """A follower fetched `key` from `fetch_offset` (its log end) with its log starting at
        `log_start_offset`, naming `broker_epoch`: move the high watermark and propose it into
        the ISR if it caught up. `quiet_since_ms`: its fetch session left the partition unread
        until now as quiet, i.e. caught up, at that time (see `ReplicaSet.follower_fetched`).
        Raises StaleFetch for a fetch of an older incarnation."""
        leadership = self.leaders.get(key)
        if leadership is None:
            return
        plog = leadership.log
        now = self.broker.clock()
        follower = leadership.replica_set.followers.get(replica_id)
        start_before = None if follower is None else follower.log_start_offset
        if leadership.replica_set.follower_fetched(
            replica_id, fetch_offset, plog.log_end_offset, now, log_start_offset, broker_epoch,
            quiet_since_ms,
        ):  # fmt: skip
            self._set_high_watermark(key, leadership)
        elif (
            follower := leadership.replica_set.followers.get(replica_id)
        ) is not None and follower.log_start_offset != start_before:
            self._notify(key)  # the low watermark may have moved: DeleteRecords waits on it
        if replica_id not in leadership.replica_set.isr:
            self._propose(key, leadership, now)

    def low_watermark(self, key: Key) -> int | None:
        """DeleteRecords' low watermark of a replicated partition led here (Kafka's
        lowWatermarkIfLeader: the smallest log start of this leader and of every follower on a
        registered, unfenced broker); None when this broker does not lead it replicated."""
        leadership = self.leaders.get(key)
        if leadership is None:
            return None
        image = self.broker.image
        alive = {b for b in leadership.replicas if (r := image.broker(b)) and not r.fenced}
        return leadership.replica_set.low_watermark(leadership.log.log_start_offset, alive)

    def preferred_read_replica(
        self, key: Key, fetch_offset: int, client_rack: str, listener: str
    ) -> int:
        """KIP-392: the follower a consumer on `client_rack` should fetch `key` from, or -1
        (see `read_replica`; only a leader of a replicated partition names one)."""
        selector = self.broker.config.replica_selector_class
        leadership = self.leaders.get(key)
        if leadership is None or selector is None or not client_rack:
            return NO_PREFERRED_REPLICA
        image = self.broker.image
        alive = {n.broker_id: n for n in broker_nodes(self.broker, image, listener)}
        me = self.broker.node_id
        if me not in alive:
            return NO_PREFERRED_REPLICA  # Kafka: a leader without an endpoint is never named
        now = self.broker.clock()
        replica_set = leadership.replica_set
        followers = [
            ReplicaView(broker_id, alive[broker_id].rack, f.log_end_offset,
                        now - f.last_caught_up_ms)
            for broker_id, f in replica_set.followers.items()
            if broker_id in replica_set.isr
            and broker_id in alive
            and f.log_start_offset <= fetch_offset <= f.log_end_offset
        ]  # fmt: skip
        leader = ReplicaView(me, alive[me].rack, leadership.log.log_end_offset, 0)
        return select_read_replica(selector, client_rack, leader, followers)

    def served_consumer(self, key: Key) -> None:
        """A consumer read records of followed partition `key` here (KIP-392): say so once."""
        if key in self.targets and key not in self.serving_consumers:
            self.serving_consumers.add(key)
            log.info("%s-%d: serving consumer fetches as a follower (KIP-392)", *key)

    def leader_appended(self, key: Key) -> Leadership | None:
        """After an append here: the high watermark may move at once (an ISR of the leader
        alone). The partition's leadership if it is replicated (acks=all waits on it)."""
        leadership = self.leaders.get(key)
        if leadership is not None:
            self._advance(key, leadership)
        return leadership

    def _advance(self, key: Key, leadership: Leadership) -> None:
        if leadership.replica_set.advance(leadership.log.log_end_offset):
            self._set_high_watermark(key, leadership)

    def _set_high_watermark(self, key: Key, leadership: Leadership) -> None:
        leadership.log.update_high_watermark(leadership.replica_set.high_watermark)
        self._notify(key)

    def _notify(self, key: Key) -> None:
        for listener in self.high_watermark_listeners:
            listener(*key)

    # --- ISR changes -------------------------------------------------------------------------

    def _propose(self, key: Key, leadership: Leadership, now: int) -> None:
        image = self.broker.image
        eligible = {b.broker_id: b.epoch for b in image.brokers() if b.active}
        proposed = leadership.replica_set.proposal(
            leadership.log.log_end_offset, now, eligible,
            check_epochs=not planted("isr-trusts-old-incarnation"),
            quiet_since=lambda replica, epoch: self._quiet_since(key, replica, epoch),
        )  # fmt: skip
        if proposed is None:
            return
        log.info(
            "%s: proposing ISR %s (committed %s)",
            leadership.log.name, sorted(proposed.isr), sorted(leadership.replica_set.isr),
        )  # fmt: skip
        self._queue(key, leadership, proposed)

    def _quiet_since(self, key: Key, replica_id: int, broker_epoch: int | None) -> int:
        """When the latest fetch of `replica_id`'s sessions (in `broker_epoch`) that watch
        `key` started (-1: none): `ReplicaSet.proposal`'s `quiet_since`."""
        return max(
            (s.quiet_since(key, replica_id, broker_epoch) for s in self.follower_sessions),
            default=-1,
        )

    def _queue(self, key: Key, leadership: Leadership, proposal: Proposal) -> None:
        self._outbox.proposals[key] = (leadership, proposal)
        self._outbox.ready.set()

    def _in_flight(self, key: Key, leadership: Leadership, proposal: Proposal) -> bool:
        """`proposal` is still what `key`'s current leadership waits on."""
        return self.leaders.get(key) is leadership and leadership.replica_set.pending is proposal

    def check_isr(self) -> None:
        """Shrink or expand every led ISR that needs it (the periodic check)."""
        now = self.broker.clock()
        for key, leadership in list(self.leaders.items()):
            self._propose(key, leadership, now)
            self._advance(key, leadership)

    async def isr_loop(self) -> None:
        while True:
            lag = self.broker.config.replica_lag_time_max_ms
            await trio.sleep(max(lag / 2, 10) / 1000)
            self.check_isr()

    async def alter_partition_loop(self) -> None:
        """Send queued proposals, one AlterPartition at a time, batched."""
        while True:
            await self._outbox.ready.wait()
            self._outbox.ready = trio.Event()
            batch, self._outbox.proposals = self._outbox.proposals, {}
            if batch:
                await self._send(batch)

    async def _send(self, batch: dict[Key, tuple[Leadership, Proposal]]) -> None:
        batch = {
            key: (leadership, proposal)
            for key, (leadership, proposal) in batch.items()
            if self._in_flight(key, leadership, proposal)
        }
        if not batch:
            return
        own_epoch = self.broker.controller.broker_epoch
        image = self.broker.image
        topics: dict[uuid.UUID, AlterPartitionRequest.TopicData] = {}
        for (_, index), (leadership, proposal) in batch.items():
            members = [
                AlterPartitionRequest.BrokerState(broker_id, epoch)
                for broker_id, epoch in leadership.replica_set.member_epochs(
                    proposal.isr, own_epoch
                )
            ]
            if planted("isr-trusts-old-incarnation"):  # the epochs of the image, not the fetches
                members = [
                    AlterPartitionRequest.BrokerState(
                        m.broker_id, r.epoch if (r := image.broker(m.broker_id)) else -1
                    )
                    for m in members
                ]
            topic = topics.setdefault(
                leadership.topic_id, AlterPartitionRequest.TopicData(leadership.topic_id)
            )
            topic.partitions.append(
                AlterPartitionRequest.PartitionData(
                    partition_index=index,
                    leader_epoch=leadership.leader_epoch,
                    new_isr_with_epochs=members,
                    leader_recovery_state=RECOVERED,
                    partition_epoch=leadership.partition_epoch,
                )
            )
        request = AlterPartitionRequest(
            broker_id=self.broker.node_id,
            broker_epoch=own_epoch,
            topics=list(topics.values()),
        )
        try:
            response = await self._request(request)
        except ControllerUnavailable as exc:
            log.warning("AlterPartition not answered: %s; sending it again", exc)
            response = AlterPartitionResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
        resend = self._answered(batch, response)
        if resend:
            await trio.sleep(RESEND_AFTER_S)
            for key, (leadership, proposal) in resend.items():
                if self._in_flight(key, leadership, proposal):
                    self._outbox.proposals.setdefault(key, (leadership, proposal))
            self._outbox.ready.set()

    async def _request(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        controller = self.broker.controller
        if controller.is_active:
            return await controller.alter_partition(request, ALTER_PARTITION_VERSION)
        if self._client is None:
            config = self.broker.config

            def lookup() -> Address | None:
                active = controller.active_controller_id
                return None if active is None else controller.controller_address(active)

            next_change = getattr(controller, "next_change", None)
            self._client = ActiveControllerClient(
                lookup,
                client_id=f"broker-{config.node_id}-alter-partition",
                retry_backoff_ms=config.controller_quorum_retry_backoff_ms,
                attempt_timeout_ms=config.controller_quorum_request_timeout_ms,
                changes=next_change if callable(next_change) else None,
            )
        response = await self._client.request(
            request, ALTER_PARTITION_VERSION, ALTER_PARTITION_TIMEOUT_S
        )
        assert isinstance(response, AlterPartitionResponse)
        return response

    def _answered(
        self, batch: dict[Key, tuple[Leadership, Proposal]], response: AlterPartitionResponse
    ) -> dict[Key, tuple[Leadership, Proposal]]:
        """Settle what the answer settles (see the module docstring); returns the proposals
        to send again."""
        answers: dict[tuple[uuid.UUID, int], AlterPartitionResponse.PartitionData] = {}
        if response.error_code == ErrorCode.NONE:
            for topic in response.topics:
                for p in topic.partitions:
                    answers[(topic.topic_id, p.partition_index)] = p
        resend: dict[Key, tuple[Leadership, Proposal]] = {}
        for key, (leadership, proposal) in batch.items():
            if not self._in_flight(key, leadership, proposal):
                continue  # the metadata settled it meanwhile
            answer = answers.get((leadership.topic_id, key[1]))
            if planted("isr-forgets-unanswered-proposal") and (
                answer is None or answer.error_code != ErrorCode.NONE
            ):  # the bug put back for tests: any failure forgets the proposal
                leadership.replica_set.proposal_refused(proposal)
                continue
            if answer is None:  # no answer, or a top-level error: the outcome is unknown
                resend[key] = (leadership, proposal)
                continue
            if answer.error_code != ErrorCode.NONE:
                error = ErrorCode(answer.error_code)
                if error in RESET_ON:
                    log.info("%s: ISR change refused (%s)", leadership.log.name, error.name)
                    leadership.replica_set.proposal_refused(proposal)
                elif error in WAIT_FOR_METADATA_ON:
                    log.info(
                        "%s: ISR change refused (%s); waiting for the metadata",
                        leadership.log.name, error.name,
                    )  # fmt: skip
                else:
                    log.warning(
                        "%s: ISR change got %s; sending it again", leadership.log.name, error.name
                    )
                    resend[key] = (leadership, proposal)
                continue
            if answer.leader_epoch != leadership.leader_epoch:
                continue  # stale: the metadata will settle it
            if answer.partition_epoch >= leadership.partition_epoch:
                leadership.partition_epoch = answer.partition_epoch
                before = len(leadership.replica_set.isr)
                leadership.replica_set.committed(answer.isr)
                self.broker.metrics.isr_changed(before, len(answer.isr))
            self._advance(key, leadership)
        return resend

    async def run(self) -> None:
        """The ISR check, the AlterPartition sender and the follower fetchers."""
        self.fetchers = FetcherManager(self)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.isr_loop)
                nursery.start_soon(self.alter_partition_loop)
                nursery.start_soon(self.fetchers.run)
        finally:
            with trio.CancelScope(shield=True):
                if self._client is not None:
                    await self._client.aclose()
                await self.fetchers.aclose()
