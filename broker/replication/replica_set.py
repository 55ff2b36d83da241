"""`ReplicaSet`: a partition leader's view of its followers, without I/O.

The leader learns each follower's log end offset from the follower's own Fetch requests (a
follower asks for offset N once it holds everything below N). From those it derives what
Kafka's `Partition` does, and nothing here touches a log, a socket or a clock of its own:

- **High watermark**: the smallest log end offset among the leader and the followers counted
  for it, never moving back. While an ISR change is in flight (AlterPartition sent, not yet in
  the metadata), the members counted are the union of the committed and the proposed ISR (Kafka's
  "maximal ISR"): a follower being added counts at once, one being removed still counts, so
  the high watermark is safe under either outcome.
- **Caught up**: a follower is caught up at a fetch whose offset reaches the leader's log end
  offset at that moment, and also, as of the previous fetch's time, when it reaches the
  leader's log end offset as it was at the previous fetch (Kafka's lastCaughtUpTimeMs rule:
  a follower that keeps up with a busy leader is never more than one fetch behind).
- **Shrink**: an ISR follower not caught up for more than `replica.lag.time.max.ms` (and not
  at the leader's log end offset) leaves the ISR.
- **Expand**: a follower outside the ISR joins once its log end offset reaches the high
  watermark and the start of the leader's epoch (so it holds this leader's history).
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

from collections.abc import Container, Iterable
from dataclasses import dataclass

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
        self.pending: frozenset[int] | None = None
        """An ISR proposed in an AlterPartition not yet answered (None: none in flight)."""
        self.high_watermark = high_watermark
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
    ) -> bool:
        """A follower fetched from `fetch_offset` while the leader's log ended at `leader_end`.

        Returns whether the high watermark moved. A replica that is not assigned is ignored
        (the Fetch handler answers it NOT_LEADER_OR_FOLLOWER before asking).
        """
        follower = self.followers.get(replica_id)
        if follower is None:
            return False
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

    def committed(self, isr: Iterable[int]) -> None:
        """The metadata now holds `isr` (an AlterPartition answered, or any ISR change)."""
        self.isr = frozenset(isr)
        if self.pending is not None and self.pending == self.isr:
            self.pending = None

    def proposal_failed(self) -> None:
        """The AlterPartition in flight was refused or lost: propose again from the ISR."""
        self.pending = None

    # --- decisions ---------------------------------------------------------------------------

    def counted(self) -> frozenset[int]:
        """The replicas the high watermark waits for (the maximal ISR; see the module doc)."""
        return self.isr | (self.pending or frozenset())

    def advance(self, leader_end: int) -> bool:
        """Move the high watermark to the smallest log end offset counted; True if it moved."""
        ends = [leader_end]
        for replica in self.counted():
            if replica == self.leader_id:
                continue
            follower = self.followers.get(replica)
            ends.append(UNKNOWN_OFFSET if follower is None else follower.log_end_offset)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def proposal(
        self, leader_end: int, now_ms: int, eligible: Iterable[int]
    ) -> frozenset[int] | None:
        """The ISR to propose now (None: keep it, or one is already in flight).

        `eligible` are the brokers that may join (registered, unfenced, not shutting down).
        """
        if self.pending is not None:
            return None
        may_join = frozenset(eligible)
        isr = set(self.isr)
        for replica, follower in self.followers.items():
            if replica in isr:
                behind = follower.log_end_offset != leader_end
                if behind and now_ms - follower.last_caught_up_ms > self.lag_time_max_ms:
                    isr.discard(replica)
            elif (
                replica in may_join
                and follower.log_end_offset >= self.high_watermark
                and follower.log_end_offset >= self.leader_epoch_start
            ):
                isr.add(replica)
        isr.add(self.leader_id)
        proposed = frozenset(isr)
        if proposed == self.isr:
            return None
        self.pending = proposed
        return proposed

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
