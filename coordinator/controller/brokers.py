"""Brokers in the cluster: registration, heartbeats, leases, fencing and controlled shutdown.

Kafka's `ClusterControlManager`, `BrokerHeartbeatManager` and the broker half of
`ReplicationControlManager`, over Strom's image:

- BrokerRegistration (API 62) writes a RegisterBrokerRecord, fenced, whose offset is the
  broker's epoch. A different incarnation of a broker id whose previous incarnation is
  unfenced with a valid session is refused (DUPLICATE_BROKER_REGISTRATION), as in Kafka,
  unless it names one of the previous incarnation's log directories (their `directory.id`s)
  AND the previous one has stopped heartbeating (`BrokerLeases.silent`: no heartbeat for two
  heartbeat intervals): then it is a restart (a kill -9, a power cut) and replaces the old
  incarnation at once, where Kafka waits for the lease to run out. The directory lock is
  local to a host, so a shared directory id alone proves nothing (a copy of the directory on
  another host): a second process that still heartbeats is always refused. A broker that
  cannot run the finalized metadata.version is refused (UNSUPPORTED_VERSION); another
  cluster id, INCONSISTENT_CLUSTER_ID.
- BrokerHeartbeat (API 63) renews the broker's lease and moves it between Kafka's states:
  FENCED -> UNFENCED once its metadata offset reaches its registration record's offset;
  UNFENCED -> CONTROLLED_SHUTDOWN (`want_shut_down` while it leads partitions: they move
  away) -> SHUTDOWN_NOW (`should_shut_down`) once it leads none and every active broker has
  seen the change; `want_fence` fences it. A heartbeat with another epoch is STALE_BROKER_EPOCH.
- Leases: a broker that has not heartbeated for `broker.session.timeout.ms` is fenced
  (`fence_stale_broker_steps`, one per call, as Kafka's `maybeFenceOneStaleBroker`). A heartbeat
  renews the lease when it arrives (`BrokerLeases.touch`), not when its turn comes: a
  controller busy with a long queue of commands does not fence the brokers waiting in it.
- Fencing (or controlled shutdown) takes the broker out of every ISR it is in and re-elects
  the leaders it held among the remaining active in-sync replicas. Without eligible leader
  replicas (KIP-966) the last member stays in the ISR; with them (feature
  `eligible.leader.replicas.version` >= 1) an ISR that falls below the topic's
  min.insync.replicas moves its leavers into the ELR and may empty (see election.py). With
  no replica to lead, the partition is offline (leader -1), never led by a fenced broker,
  unless the topic allows unclean leader election: then the first active replica outside the
  ISR leads (ISR = just it, RECOVERING). Unfencing re-runs the election of every leaderless
  partition with the broker acceptable again: an ELR member may lead once the ISR is empty.
- With ELR, a re-registration without a matching `previous_broker_epoch` (an unclean
  shutdown) takes the broker out of every ISR and ELR first.

Fencing, shutting down, unfencing and re-registering a broker that holds many partitions write
a PartitionChangeRecord for each (about 100,000 for one of 30 brokers at a million
partitions): `register_broker_steps`, `broker_heartbeat_steps` and `fence_stale_broker_steps`
plan in steps (`result.Planning`), yielding every PLAN_SLICE partitions, and build the replica
index in steps when the image has none yet.

Leases are the active controller's soft state (`BrokerLeases`), never in the log: a controller
that becomes active gives every registered broker a fresh lease (`BrokerLeases.activate`).
Time comes in as `now_ms`; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from strom.config.planted import planted
from strom.config.values import LONG_MAX
from strom.coordinator.controller.election import Election, is_active, plan_change
from strom.coordinator.controller.result import (
    PLAN_SLICE,
    ControllerError,
    ControllerResult,
    Planning,
)
from strom.coordinator.metadata.image import (
    METADATA_VERSION,
    MetadataImage,
    TopicImage,
)
from strom.coordinator.metadata.replica_index import replica_index, replica_index_steps
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.wire.messages.broker_heartbeat import (
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
    )
    from strom.wire.messages.broker_registration import (
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
    )

Unclean = Callable[[TopicImage], bool]
"""Whether a topic allows unclean leader election (its effective config)."""
MinIsr = Callable[[TopicImage], "int | None"]
"""A topic's min.insync.replicas when eligible leader replicas are enabled, else None."""


def _no_elr(_topic: TopicImage) -> int | None:
    return None


FENCE, UNFENCE = 1, -1
"""BrokerRegistrationChangeRecord's fenced / inControlledShutdown values (0: no change)."""
MINIMUM_KRAFT_METADATA_VERSION = 1
"""What a broker that names no metadata.version range is assumed to support (Kafka's rule)."""


class BrokerState(Enum):
    """Kafka's BrokerControlState: (fenced, in controlled shutdown, should shut down)."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, True, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


@dataclass
class Session:
    """One broker incarnation's lease: who (epoch), when last heard from, how far it has read."""

    epoch: int
    last_contact_ms: int
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1


@dataclass
class BrokerLeases:
    """The active controller's view of broker liveness (Kafka's BrokerHeartbeatManager)."""

    session_timeout_ms: int
    silent_after_ms: int = 4000
    """No heartbeat for this long (two `broker.heartbeat.interval.ms`): the incarnation stopped
    heartbeating; a restart on its directories may replace it before its lease runs out."""
    sessions: dict[int, Session] = field(default_factory=dict)

    def activate(self, image: MetadataImage, now_ms: int, *, except_broker: int | None) -> None:
        """Becoming active: every registered broker gets a fresh lease from `now_ms`.

        `except_broker` (a combined node's own broker, which cannot still be running
        elsewhere: its directories are locked by this process) gets none, so it re-registers
        at once instead of waiting out the session of its previous incarnation.
        """
        self.sessions = {
            b.broker_id: Session(b.epoch, now_ms)
            for b in image.brokers()
            if b.broker_id != except_broker
        }

    def has_valid_session(self, broker_id: int, epoch: int, now_ms: int) -> bool:
        session = self.sessions.get(broker_id)
        return (
            session is not None
            and session.epoch == epoch
            and session.last_contact_ms + self.session_timeout_ms >= now_ms
        )

    def silent(self, broker_id: int, epoch: int, now_ms: int) -> bool:
        """The incarnation has not heartbeated for `silent_after_ms` (or was never heard from
        by this controller, and not since it became active)."""
        session = self.sessions.get(broker_id)
        if session is None or session.epoch != epoch:
            return True
        return session.last_contact_ms + self.silent_after_ms < now_ms

    def touch(self, image: MetadataImage, broker_id: int, epoch: int, now_ms: int) -> None:
        """A heartbeat from this incarnation arrived at `now_ms`: its lease is renewed then,
        before the heartbeat waits its turn behind other commands (Kafka's
        `trackBrokerHeartbeat`), so a backlog of commands never fences a live broker. A
        heartbeat of an epoch not registered renews nothing."""
        registration = image.broker(broker_id)
        if registration is None or registration.epoch != epoch:
            return
        session = self.sessions.get(broker_id)
        if session is None or session.epoch != epoch:
            self.sessions[broker_id] = Session(epoch, now_ms)
        elif session.last_contact_ms < now_ms:
            session.last_contact_ms = now_ms

    def expired(self, broker_id: int, epoch: int, now_ms: int) -> bool:
        """The broker's lease has run out (a broker never heard from has no lease to lose)."""
        session = self.sessions.get(broker_id)
        if session is None or session.epoch != epoch:
            return False
        return session.last_contact_ms + self.session_timeout_ms < now_ms

    def lowest_active_offset(self, image: MetadataImage) -> int:
        """The lowest metadata offset any active (unfenced, not shutting down) broker reported."""
        offsets = [
            s.metadata_offset
            for broker_id, s in self.sessions.items()
            if (b := image.broker(broker_id)) is not None and b.epoch == s.epoch and b.active
        ]
        return min(offsets, default=LONG_MAX)


# --- BrokerRegistration -------------------------------------------------------------------------


def register_broker_steps(
    image: MetadataImage,
    leases: BrokerLeases,
    request: BrokerRegistrationRequest,
    *,
    cluster_id: str,
    broker_epoch: int,
    now_ms: int,
    unclean: Unclean = lambda _topic: False,
    elr: MinIsr = _no_elr,
) -> Planning[BrokerRegistrationResponse]:
    """Register a broker incarnation (fenced); `broker_epoch` is the offset of the command's
    first record.

    A new incarnation of a broker whose previous one is still unfenced (a restart before the
    lease ran out, see `_registration_record`) first fences that one as its lease running out
    would: it leaves every ISR and every leadership, and a partition whose only in-sync
    replica it is goes offline with a new leader epoch (the ISR keeps it), to be led again,
    in yet another epoch, once the new incarnation is unfenced. A restarted broker never
    leads in its previous incarnation's leader epoch: its log may be shorter than what that
    epoch's followers hold (a power cut loses what was not synced), and appends in the same
    epoch would pass the followers' divergence check. (A single-replica partition has no
    follower to diverge from it and keeps its leader and epoch: a single node restarts
    without rewriting every partition.) Its epoch is the offset of its own
    RegisterBrokerRecord, after those records; the record itself fences the old one.

    With eligible leader replicas enabled, a registration whose `previous_broker_epoch` is not
    the epoch of the registered incarnation (its clean-shutdown marker is missing or stale: the
    previous process did not stop cleanly) is an unclean shutdown, as in Kafka: the broker
    leaves every ISR and every ELR (its log may lack acknowledged records) and its leaderships
    move, before its new registration record. (A registration repeated by the same
    incarnation is not a restart and changes no partition.)
    """
    from strom.wire.messages.broker_registration import BrokerRegistrationResponse

    existing = image.broker(request.broker_id)
    replaced: list[Message] = []
    if existing is not None and existing.incarnation_id != request.incarnation_id:
        broker_id = existing.broker_id
        if image.elr_enabled and request.previous_broker_epoch != existing.epoch:
            replaced = yield from _remove_from_isrs(
                image, broker_id, unclean, elr, unclean_shutdown=True
            )
        elif not existing.fenced:
            replaced = yield from _remove_from_isrs(
                image, broker_id, unclean, elr, replicated_only=True,
                shared_only=planted("restart-keeps-leader-epoch"),
            )  # fmt: skip
    epoch = broker_epoch + len(replaced)
    try:
        record = _registration_record(image, leases, request, cluster_id, epoch, now_ms)
    except ControllerError as exc:
        return ControllerResult(BrokerRegistrationResponse(error_code=exc.error.code))
    leases.sessions[record.broker_id] = Session(epoch, now_ms)
    return ControllerResult(BrokerRegistrationResponse(broker_epoch=epoch), [*replaced, record])


def _registration_record(
    image: MetadataImage,
    leases: BrokerLeases,
    request: BrokerRegistrationRequest,
    cluster_id: str,
    broker_epoch: int,
    now_ms: int,
) -> RegisterBrokerRecord:
    if request.cluster_id != cluster_id:
        raise ControllerError(
            ErrorCode.INCONSISTENT_CLUSTER_ID,
            f"Expected cluster ID {cluster_id}, but got cluster ID {request.cluster_id}",
        )
    existing = image.broker(request.broker_id)
    if (
        existing is not None
        and existing.incarnation_id != request.incarnation_id
        and not existing.fenced  # Kafka: a fenced broker holds no valid session
        and leases.has_valid_session(existing.broker_id, existing.epoch, now_ms)
        and not (
            set(existing.log_dirs) & set(request.log_dirs)
            and (
                leases.silent(existing.broker_id, existing.epoch, now_ms)
                or planted("restart-keeps-leader-epoch")
            )
        )
    ):
        raise ControllerError(
            ErrorCode.DUPLICATE_BROKER_REGISTRATION,
            "Another broker is registered with that broker id.",
        )
    if request.is_migrating_zk_broker:
        raise ControllerError(
            ErrorCode.BROKER_ID_NOT_REGISTERED,
            "Controller does not support registering ZK brokers.",
        )
    features = [
        (f.name, f.min_supported_version, f.max_supported_version) for f in request.features
    ]
    if not any(name == METADATA_VERSION for name, _, _ in features):
        features.append(
            (METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION)
        )
    for name, low, high in features:
        finalized = image.features.get(name)
        if finalized is not None and not low <= finalized <= high:
            raise ControllerError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"Unable to register because the broker does not support version {finalized} "
                f"of {name}. It wants a version between {low} and {high}, inclusive.",
            )
    return RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=request.incarnation_id,
        broker_epoch=broker_epoch,
        end_points=[
            RegisterBrokerRecord.BrokerEndpoint(e.name, e.host, e.port, e.security_protocol)
            for e in request.listeners
        ],
        features=[RegisterBrokerRecord.BrokerFeature(n, lo, hi) for n, lo, hi in features],
        rack=request.rack,
        fenced=True,
        log_dirs=list(request.log_dirs),
    )


# --- BrokerHeartbeat ----------------------------------------------------------------------------


def broker_heartbeat_steps(
    image: MetadataImage,
    leases: BrokerLeases,
    request: BrokerHeartbeatRequest,
    *,
    next_offset: int,
    now_ms: int,
    unclean: Unclean = lambda _topic: False,
    elr: MinIsr = _no_elr,
) -> Planning[BrokerHeartbeatResponse]:
    """Renew a lease and move the broker to its next state (see the module docstring).

    `next_offset` is the offset the first record of this command would get (the controlled
    shutdown offset Kafka waits for every active broker to pass).
    """
    from strom.wire.messages.broker_heartbeat import BrokerHeartbeatResponse

    broker_id = request.broker_id
    registration = image.broker(broker_id)
    if registration is None or registration.epoch != request.broker_epoch:
        message = (
            f"No broker registration found for broker id {broker_id}"
            if registration is None
            else f"Expected broker epoch {registration.epoch}, but got broker epoch "
            f"{request.broker_epoch}"
        )
        error = ControllerError(ErrorCode.STALE_BROKER_EPOCH, message)
        return ControllerResult(BrokerHeartbeatResponse(error_code=error.error.code))
    session = leases.sessions.get(broker_id)
    if session is None or session.epoch != registration.epoch:
        session = leases.sessions[broker_id] = Session(registration.epoch, now_ms)
    session.last_contact_ms = now_ms
    session.metadata_offset = request.current_metadata_offset

    current = _current_state(image, broker_id)
    if request.want_shut_down or current is BrokerState.CONTROLLED_SHUTDOWN:
        yield from replica_index_steps(image)  # `leads_partitions` reads it
    following = _next_state(image, leases, request, current, registration.epoch)
    records: list[Message] = []
    if following is not current:
        if following is BrokerState.UNFENCED:
            records = yield from _unfence(image, broker_id, registration.epoch, unclean, elr)
        elif following is BrokerState.CONTROLLED_SHUTDOWN:
            records = yield from _enter_controlled_shutdown(
                image, broker_id, registration.epoch, unclean, elr
            )
            session.controlled_shutdown_offset = next_offset + len(records) - 1
        elif current is not BrokerState.FENCED:  # FENCED or SHUTDOWN_NOW from a live state
            records = yield from _fence(image, broker_id, registration.epoch, unclean, elr)
    if following.fenced:
        session.controlled_shutdown_offset = -1
    response = BrokerHeartbeatResponse(
        is_caught_up=request.current_metadata_offset >= registration.epoch,
        is_fenced=following.fenced,
        should_shut_down=following.should_shut_down,
    )
    return ControllerResult(response, records)


def _current_state(image: MetadataImage, broker_id: int) -> BrokerState:
    registration = image.broker(broker_id)
    assert registration is not None
    if registration.in_controlled_shutdown and not registration.fenced:
        return BrokerState.CONTROLLED_SHUTDOWN
    return BrokerState.FENCED if registration.fenced else BrokerState.UNFENCED


def _next_state(
    image: MetadataImage,
    leases: BrokerLeases,
    request: BrokerHeartbeatRequest,
    current: BrokerState,
    registration_offset: int,
) -> BrokerState:
    """Kafka's BrokerHeartbeatManager.calculateNextBrokerState."""
    if current is BrokerState.FENCED:
        if request.want_shut_down:
            return BrokerState.SHUTDOWN_NOW
        if not request.want_fence and request.current_metadata_offset >= registration_offset:
            return BrokerState.UNFENCED
        return BrokerState.FENCED
    if current is BrokerState.UNFENCED:
        if request.want_fence:
            return BrokerState.SHUTDOWN_NOW if request.want_shut_down else BrokerState.FENCED
        if request.want_shut_down:
            if leads_partitions(image, request.broker_id):
                return BrokerState.CONTROLLED_SHUTDOWN
            return BrokerState.SHUTDOWN_NOW
        return BrokerState.UNFENCED
    # CONTROLLED_SHUTDOWN: done once it leads nothing and every active broker has caught up
    # with the record that began it.
    if leads_partitions(image, request.broker_id):
        return BrokerState.CONTROLLED_SHUTDOWN
    session = leases.sessions[request.broker_id]
    if session.controlled_shutdown_offset <= leases.lowest_active_offset(image):
        return BrokerState.SHUTDOWN_NOW
    return BrokerState.CONTROLLED_SHUTDOWN


# --- leases -------------------------------------------------------------------------------------


def fence_stale_broker_steps(
    image: MetadataImage,
    leases: BrokerLeases,
    now_ms: int,
    unclean: Unclean = lambda _topic: False,
    elr: MinIsr = _no_elr,
) -> Planning[int | None]:
    """Fence one unfenced broker whose lease has expired; response: its id (None: none is)."""
    for registration in image.brokers():
        if not registration.fenced and leases.expired(
            registration.broker_id, registration.epoch, now_ms
        ):
            records = yield from _fence(
                image, registration.broker_id, registration.epoch, unclean, elr
            )
            return ControllerResult(registration.broker_id, records)
    return ControllerResult(None)


def next_lease_expiry(image: MetadataImage, leases: BrokerLeases) -> int | None:
    """When the earliest unfenced broker's lease runs out (None: no lease to watch)."""
    times = [
        s.last_contact_ms + leases.session_timeout_ms
        for b in image.brokers()
        if not b.fenced
        and (s := leases.sessions.get(b.broker_id)) is not None
        and s.epoch == b.epoch
    ]
    return min(times, default=None)


# --- leadership: what fencing, shutting down and unfencing do to partitions ---------------------


def leads_partitions(image: MetadataImage, broker_id: int) -> bool:
    return any(p.leader == broker_id for _, p in replica_index(image).held_by(image, broker_id))


Steps = Generator[None, None, list[Message]]
"""Records planned in steps (yielding every PLAN_SLICE partitions)."""


def _fence(
    image: MetadataImage, broker_id: int, epoch: int, unclean: Unclean, elr: MinIsr
) -> Steps:
    """Leaders and ISRs without the broker, then the fence itself (Kafka's order)."""
    records = yield from _remove_from_isrs(image, broker_id, unclean, elr)
    records.append(BrokerRegistrationChangeRecord(broker_id, epoch, fenced=FENCE))
    return records


def _enter_controlled_shutdown(
    image: MetadataImage, broker_id: int, epoch: int, unclean: Unclean, elr: MinIsr
) -> Steps:
    records = yield from _remove_from_isrs(image, broker_id, unclean, elr)
    records.append(BrokerRegistrationChangeRecord(broker_id, epoch, in_controlled_shutdown=FENCE))
    return records


def _unfence(
    image: MetadataImage, broker_id: int, epoch: int, unclean: Unclean, elr: MinIsr
) -> Steps:
    """The unfence, then every leaderless partition's election with the broker acceptable."""
    records: list[Message] = [BrokerRegistrationChangeRecord(broker_id, epoch, fenced=UNFENCE)]

    def usable(b: int) -> bool:
        return b == broker_id or is_active(image, b)

    index = yield from replica_index_steps(image)
    for seen, (topic, p) in enumerate(index.without_leader(image), 1):
        if seen % PLAN_SLICE == 0:
            yield
        election = Election.UNCLEAN if unclean(topic) else Election.ONLINE
        change = plan_change(topic.topic_id, p, usable, election=election, min_isr=elr(topic))
        if change is not None:
            records.append(change)
    return records


def _remove_from_isrs(
    image: MetadataImage,
    broker_id: int,
    unclean: Unclean,
    elr: MinIsr,
    *,
    unclean_shutdown: bool = False,
    replicated_only: bool = False,
    shared_only: bool = False,
) -> Steps:
    """Take the broker out of every ISR and off every leadership. Without ELR the last member
    stays in the ISR (the partition goes offline in a new leader epoch); with ELR an ISR that
    falls below min.insync.replicas moves its leavers into the ELR (and may empty: see
    election.py). `unclean_shutdown` (Kafka's handleBrokerUncleanShutdown): the
    broker restarted without a clean shutdown, so it leaves every ELR too and may not be
    elected by these changes. `replicated_only`: leave single-replica partitions alone;
    `shared_only`: also those whose only ISR member it is (a planted bug, for tests)."""

    def usable(b: int) -> bool:
        return b != broker_id and is_active(image, b)

    records: list[Message] = []
    index = yield from replica_index_steps(image)
    for seen, (topic, p) in enumerate(index.held_by(image, broker_id), 1):
        if seen % PLAN_SLICE == 0:
            yield
        in_elr = unclean_shutdown and broker_id in p.elr
        if broker_id not in p.isr and p.leader != broker_id and not in_elr:
            continue
        if replicated_only and len(p.replicas) == 1:
            continue
        if shared_only and p.isr == (broker_id,):
            continue
        election = Election.UNCLEAN if unclean(topic) else Election.ONLINE
        isr = [r for r in p.isr if r != broker_id]
        change = plan_change(
            topic.topic_id,
            p,
            usable,
            election=election,
            isr=isr,
            min_isr=elr(topic),
            unclean_shutdown=[broker_id] if unclean_shutdown else (),
        )
        if change is not None:
            records.append(change)
    return records
