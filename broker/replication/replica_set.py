"""`ReplicaSet`: a partition leader's view of its followers, without I/O.

The leader learns each follower's log end offset from the follower's own Fetch requests (a
follower asks for offset N once it holds everything below N). From those it derives what
Kafka's `Partition` does, and nothing here touches a log, a socket or a clock of its own:

- **High watermark**: the smallest log end offset among the leader and the followers counted
  for it, never moving back. While an ISR change is in flight (AlterPartition sent, not yet in
  the metadata), the members counted are the union of the committed and the proposed ISR (Kafka's
  "maximal ISR"): a follower being added counts at once, one being removed still counts, so
  the high watermark is safe under either outcome. A proposal stays in flight until the
  controller's answer or a newer partition epoch in the metadata settles it (`committed`); an
  error settles it only when the controller says the change was not made
  (`proposal_refused`: INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED): a timeout or a
  NOT_CONTROLLER may hide a change that committed.
- **Strict min ISR** (with eligible leader replicas, KIP-966): while the committed ISR is
  smaller than `min_isr` (the topic's min.insync.replicas, capped at the replication factor)
  the high watermark does not move, as in Kafka 4: every replica the controller moves into
  the ELR then holds every committed record. `min_isr` 0 (ELR disabled) turns the rule off.
- **Caught up**: a follower is caught up at a fetch whose offset reaches the leader's log end
  offset at that moment, and also, as of the previous fetch's time, when it reaches the
  leader's log end offset as it was at the previous fetch (Kafka's lastCaughtUpTimeMs rule:
  a follower that keeps up with a busy leader is never more than one fetch behind).
- **Shrink**: an ISR follower not caught up for more than `replica.lag.time.max.ms` (and not
  at the leader's log end offset) leaves the ISR. A partition the follower's fetch session
  leaves quiet is not read by its fetches (nothing appended, the follower still at its last
  offset), so its caught-up time is not written on each fetch; it is derived when needed
  (`quiet_since`): a follower caught up at its last read was caught up when its session's
  latest fetch started, as Kafka's read of every partition on every fetch would have said.
- **Expand**: a follower outside the ISR joins once its log end offset reaches the high
  watermark and the start of the leader's epoch (so it holds this leader's history), and its
  fetches carried the broker epoch its broker is registered with now (KIP-903): a log end
  learnt from an earlier incarnation proves nothing about the restarted process's log.
- **Broker epochs** (KIP-903): each follower's state remembers the broker epoch its fetches
  named; a fetch naming an older one is stale (refused), and a new registration of the
  follower's broker (`registered`) forgets what the previous incarnation reported. The ISR
  proposed carries each follower's epoch as its fetches named it (-1 when unknown), so the
  controller refuses the change if that broker registered again meanwhile.
- **acks=all**: a produce whose last offset is below the high watermark is replicated to the
  whole ISR; `min.insync.replicas` is checked before the append (NOT_ENOUGH_REPLICAS) and
  again when it completes (NOT_ENOUGH_REPLICAS_AFTER_APPEND), as Kafka does.
- **Low watermark** (DeleteRecords): the smallest log start offset among the leader and every
  assigned follower on a live (registered, unfenced) broker, ISR member or not, as Kafka's
  `Partition.lowWatermarkIfLeader`. A follower's log start is unknown (-1) until it fetched
  from this leadership, so a new leader's low watermark waits for each live follower's first
  fetch (Kafka resets the followers' states on leadership).

The driver that owns a partition's leadership feeds it fetches and the committed ISR from each
metadata image, sends the AlterPartition it proposes, and completes waiting produces when
`high_watermark` moves.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass

from strom.config.planted import planted
from strom.wire.errors import ErrorCode

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class Follower:
    """What the leader knows of one follower replica."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    """The follower's log start, as its last fetch said (KIP-392's read replica choice)."""
    broker_epoch: int | None = None
    """The broker epoch its fetches named (None: no fetch yet; -1: a fetch without one)."""


@dataclass(eq=False, slots=True)
class Proposal:
    """An ISR change sent to the controller; identity tells one proposal from the next."""

    isr: frozenset[int]


QuietSince = Callable[[int, "int | None"], int]
"""(follower id, the broker epoch its fetches named) -> when its fetch session's latest fetch
in that epoch started with this partition quiet (-1: no such session)."""


def _quiet_caught_up(replica: int, follower: Follower, quiet_since: QuietSince | None) -> int:
    """When the follower was last caught up as its session's quiet fetches say: at its
    session's latest fetch, if it was caught up at its last read of the partition (its offset
    then the leader's log end; nothing appended until that fetch, which left it unread)."""
    if (
        quiet_since is None
        or follower.log_end_offset < 0
        or follower.log_end_offset != follower.leader_end_at_last_fetch
    ):
        return -1
    return quiet_since(replica, follower.broker_epoch)


class StaleFetch(Exception):
    """A fetch from an older incarnation of the follower than one already heard from."""


class ReplicaSet:
    """One partition's replicas as its leader `leader_id` tracks them."""

    def __init__(
        self,
        leader_id: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        *,
        high_watermark: int,
        leader_epoch_start: int,
        lag_time_max_ms: int,
        now_ms: int,
    ) -> None:
        self.leader_id = leader_id
        self.isr = frozenset(isr)
        """The ISR committed in the metadata."""
        self.pending: Proposal | None = None
        """An ISR change in flight: sent, or refused in a way that leaves its outcome unknown
        (None: none in flight)."""
        self.high_watermark = high_watermark
        self.min_isr = 0
        """Strict min ISR (see the module docstring); 0: off."""
        self.leader_epoch_start = leader_epoch_start
        self.lag_time_max_ms = lag_time_max_ms
        # A follower starts out as caught up "now": a new leader gives its ISR a full lag
        # interval to fetch before it may shrink (Kafka resets replica states on leadership).
        self.followers = {
            r: Follower(last_caught_up_ms=now_ms if r in self.isr else 0)
            for r in replicas
            if r != leader_id
        }

    # --- inputs ------------------------------------------------------------------------------

    def follower_fetched(
        self,
        replica_id: int,
        fetch_offset: int,
        leader_end: int,
        now_ms: int,
        log_start_offset: int = UNKNOWN_OFFSET,
        broker_epoch: int = -1,
        quiet_since_ms: int = -1,
    ) -> bool:
        """A follower fetched from `fetch_offset` while the leader's log ended at `leader_end`,
        naming `broker_epoch` (-1: none).

        `quiet_since_ms`: the follower's fetch session skipped this partition as quiet up to
        that time (its fetches went on, the partition unread: the follower still at its last
        fetch offset, nothing appended). If that last fetch had it caught up and it still asks
        for the same offset, it was caught up then too, as a fetch reading it would have said.

        Returns whether the high watermark moved. A replica that is not assigned is ignored
        (the Fetch handler answers it NOT_LEADER_OR_FOLLOWER before asking). Raises
        StaleFetch for a fetch naming an older broker epoch than an earlier fetch did.
        """
        follower = self.followers.get(replica_id)
        if follower is None:
            return False
        known = follower.broker_epoch
        if broker_epoch >= 0 and known is not None and known != broker_epoch:
            if known > broker_epoch:
                raise StaleFetch(f"broker epoch {broker_epoch} is older than {known}")
            if known >= 0:  # a new incarnation: nothing the previous one said holds
                follower = self.followers[replica_id] = Follower()
        if broker_epoch >= 0 or known is None:
            follower.broker_epoch = broker_epoch
        if (
            quiet_since_ms > follower.last_fetch_ms
            and fetch_offset == follower.log_end_offset == follower.leader_end_at_last_fetch
        ):
            follower.last_fetch_ms = quiet_since_ms
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, quiet_since_ms)
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.leader_end_at_last_fetch:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.log_start_offset = log_start_offset
        follower.leader_end_at_last_fetch = leader_end
        follower.last_fetch_ms = now_ms
        return self.advance(leader_end)

    def reassigned(self, replicas: Iterable[int]) -> None:
        """The replica set changed (a reassignment): new followers start unknown and outside
        the ISR until they catch up; removed ones are forgotten."""
        wanted = {r for r in replicas if r != self.leader_id}
        for replica in wanted - self.followers.keys():
            self.followers[replica] = Follower()
        for replica in self.followers.keys() - wanted:
            del self.followers[replica]

    def registered(self, replica_id: int, broker_epoch: int) -> None:
        """The metadata says `replica_id`'s broker is registered with `broker_epoch`: when its
        fetches named an older one, that incarnation is gone and what it reported with it
        (Kafka fences such state by the broker epoch, KIP-903)."""
        follower = self.followers.get(replica_id)
        if follower is None or follower.broker_epoch is None:
            return
        if 0 <= follower.broker_epoch < broker_epoch:
            self.followers[replica_id] = Follower()

    def committed(self, isr: Iterable[int]) -> None:
        """The controller decided: `isr` is the committed ISR (an AlterPartition's answer, or
        metadata with a newer partition epoch than the proposal in flight was made from), and
        no change is in flight any more."""
        self.isr = frozenset(isr)
        self.pending = None

    def proposal_refused(self, proposal: Proposal) -> None:
        """The controller says `proposal` was not made (INELIGIBLE_REPLICA,
        OPERATION_NOT_ATTEMPTED): back to the committed ISR, to propose again. Any other
        failure leaves it in flight until the answer or the metadata settles it."""
        if self.pending is proposal:
            self.pending = None

    def report(self) -> Proposal:
        """The committed ISR, sent as a change of the leader recovery state only (an uncleanly
        elected leader's RECOVERED): in flight like any other proposal."""
        self.pending = Proposal(self.isr)
        return self.pending

    # --- decisions ---------------------------------------------------------------------------

    def counted(self) -> frozenset[int]:
        """The replicas the high watermark waits for (the maximal ISR; see the module doc)."""
        return self.isr if self.pending is None else self.isr | self.pending.isr

    def advance(self, leader_end: int) -> bool:
        """Move the high watermark to the smallest log end offset counted; True if it moved."""
        if len(self.isr) < min(self.min_isr, len(self.followers) + 1):
            return False  # strict min ISR
        ends = [leader_end]
        for replica in self.counted():
            if replica == self.leader_id:
                continue
            if planted("hw-ignores-followers"):
                break  # the bug put back for tests: acks=all once the leader alone has it
            follower = self.followers.get(replica)
            ends.append(UNKNOWN_OFFSET if follower is None else follower.log_end_offset)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def proposal(
        self,
        leader_end: int,
        now_ms: int,
        eligible: Mapping[int, int],
        *,
        check_epochs: bool = True,
        quiet_since: QuietSince | None = None,
    ) -> Proposal | None:
        """The ISR change to propose now (None: keep the ISR, or a change is in flight).

        `eligible` maps the brokers that may join (registered, unfenced, not shutting down) to
        their registered broker epochs: a follower joins only if its fetches named that epoch
        (`check_epochs` False: whatever they named, a planted bug for tests). `quiet_since`:
        when a follower's fetch session last fetched with this partition quiet (see Shrink in
        the module docstring).
        """
        if self.pending is not None:
            return None
        isr = set(self.isr)
        for replica, follower in self.followers.items():
            if replica in isr:
                behind = follower.log_end_offset != leader_end
                if (
                    behind
                    and now_ms - follower.last_caught_up_ms > self.lag_time_max_ms
                    and now_ms - _quiet_caught_up(replica, follower, quiet_since)
                    > self.lag_time_max_ms
                ):
                    isr.discard(replica)
            elif (
                replica in eligible
                and (not check_epochs or follower.broker_epoch in (-1, eligible[replica]))
                and follower.log_end_offset >= self.high_watermark
                and follower.log_end_offset >= self.leader_epoch_start
            ):
                isr.add(replica)
        isr.add(self.leader_id)
        proposed = frozenset(isr)
        if proposed == self.isr:
            return None
        self.pending = Proposal(proposed)
        return self.pending

    def member_epochs(self, isr: Iterable[int], leader_epoch: int) -> list[tuple[int, int]]:
        """(broker id, broker epoch) of each member of `isr` as AlterPartition sends them: the
        leader's own, each follower's as its fetches named it, -1 when unknown (the controller
        then skips the check; Kafka's addBrokerEpochToIsr)."""
        out = []
        for broker_id in sorted(isr):
            if broker_id == self.leader_id:
                out.append((broker_id, leader_epoch))
                continue
            follower = self.followers.get(broker_id)
            epoch = None if follower is None else follower.broker_epoch
            out.append((broker_id, -1 if epoch is None else epoch))
        return out

    def low_watermark(self, leader_log_start: int, alive: Container[int]) -> int:
        """DeleteRecords' low watermark: the smallest log start of this leader (`leader_log_start`)
        and of the followers whose brokers are `alive` (see the module docstring)."""
        low = leader_log_start
        for replica, follower in self.followers.items():
            if replica in alive and follower.log_start_offset < low:
                low = follower.log_start_offset
        return low

    def check_before_append(self, min_insync_replicas: int) -> ErrorCode:
        """acks=all: may the produce be appended at all?"""
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def acks_all_outcome(self, last_offset: int, min_insync_replicas: int) -> ErrorCode | None:
        """acks=all: the answer for a produce whose batch ends at `last_offset`, or None to
        keep it waiting (its timeout is the driver's to enforce)."""
        if self.high_watermark <= last_offset:
            return None
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE
