"""`GroupCoordinator`: every classic group of this node, as one pure state machine.

Kafka's GroupCoordinatorShard: it composes the two halves Kafka splits a group
coordinator into, `GroupMembership` (membership.py, Kafka's GroupMetadataManager:
JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers) and `OffsetStore`
(offset_store.py, Kafka's OffsetMetadataManager: OffsetCommit, OffsetFetch,
OffsetDelete, retention), and does what needs both: loading and unloading a
partition's groups, deleting a group with its offsets, and expiring offsets
(deleting an empty group left without any).

Requests, `tick(now)` and `write_completed` drive it; it never reads a clock,
opens a socket, draws a random number (member ids come from `new_id`) or
writes anything itself:

- **Time** comes in as `now` (ms) on every call; `next_deadline()` says when
  `tick` next has work.
- **Replies it holds back** (JoinGroup until the join phase ends, SyncGroup
  until the leader's assignment is written, OffsetCommit, OffsetDelete and
  DeleteGroups until their records are written) are named by waiter tokens
  from the caller; the call returns None and `(token, result)` comes out of
  `take_replies()` once released.
- **Durability is an input.** Records to append come out of `take_writes()`
  as `Write`s; the caller appends each to the group's `__consumer_offsets`
  partition (in the order emitted) and reports the outcome with
  `write_completed(now, token, error)`. Only then does the state machine act
  on them: a commit's offsets become visible and its committer is answered, a
  synced assignment reaches the members, a deleted group disappears. A failed
  write answers its waiters with Kafka's coordinator error (`storage_error`)
  and undoes what was staged for it.

Reads (OffsetFetch, ListGroups, DescribeGroups) see only written state, as
Kafka's coordinator reads at its last committed offset. A group being deleted
is Dead (refusing joins and commits with COORDINATOR_NOT_AVAILABLE) until its
tombstone is written, and back to Empty if that write fails.

`load` rebuilds the groups from the records of `__consumer_offsets`, in log order
(one partition's at a time when this node becomes its leader); `unload` forgets a
partition's groups when it stops being the leader, answering their parked
requests NOT_COORDINATOR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial

from strom.coordinator.groups import records
from strom.coordinator.groups.api import (
    CommitRequest,
    CommitResult,
    GroupConfig,
    GroupSummary,
    JoinRequest,
    JoinResult,
    ListedGroup,
    OffsetDeleteResult,
    PartitionKey,
    Reply,
    SyncRequest,
    SyncResult,
    TxnCommitRequest,
    Write,
)
from strom.coordinator.groups.membership import GroupMembership, restore
from strom.coordinator.groups.model import Group, GroupState, OffsetEntry
from strom.coordinator.groups.offset_store import OffsetStore, tombstones
from strom.coordinator.groups.outbox import Outbox
from strom.coordinator.groups.records import GroupRecord, LoadedRecord
from strom.wire.errors import ErrorCode
from strom.wire.formats.group_coordinator.group_metadata_value import GroupMetadataValue

log = logging.getLogger("strom.groups")


class GroupCoordinator:
    def __init__(self, config: GroupConfig, new_id: Callable[[], str]) -> None:
        self.config = config
        self.outbox = Outbox()
        self.membership = GroupMembership(config, new_id, self.outbox)
        self.offsets = OffsetStore(config, self.membership, self.outbox)

    @property
    def groups(self) -> dict[str, Group]:
        return self.membership.groups

    # --- what comes out: replies and writes ---------------------------------------------------

    def take_replies(self) -> list[Reply]:
        return self.outbox.take_replies()

    def take_writes(self) -> list[Write]:
        """Records to make durable, in order; report each with `write_completed`."""
        return self.outbox.take_writes()

    def write_completed(self, now: int, token: int, error: ErrorCode) -> None:
        """A write's outcome: NONE once its records are in the log, else the append's error."""
        group_id = self.outbox.complete(now, token, error)
        group = self.groups.get(group_id) if group_id is not None else None
        if group is not None:
            self.membership.schedule(group)

    # --- timers -------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When `tick` next has work (possibly a little early, never late)."""
        return self.membership.next_deadline()

    def tick(self, now: int) -> None:
        """Fire every deadline at or before `now`."""
        self.membership.tick(now)

    # --- loading ------------------------------------------------------------------------------

    def load(self, loaded: Iterable[LoadedRecord], now: int) -> None:
        """Replay one partition's records (last one per key wins, a transaction's offsets
        count once its COMMIT marker follows) and bring its groups back.

        A group with members comes back Stable with fresh session timers, so its
        members carry on with their generation after a broker restart.
        """
        loaded = list(loaded)
        metadata: dict[str, GroupMetadataValue | None] = {}
        for record in loaded:
            if isinstance(record, GroupRecord):
                metadata[record.group_id] = record.value
        with_offsets = self.offsets.replay(loaded)
        for group_id in sorted(set(metadata) | with_offsets):
            value = metadata.get(group_id)
            if value is None and not (
                self.offsets.has_offsets(group_id) or self.offsets.has_pending(group_id)
            ):
                self.offsets.forget(group_id)
                continue
            group = Group(group_id, state_timestamp=now)
            if value is not None:
                restore(group, value, now)
            self.groups[group_id] = group
            self.membership.schedule(group)

    def unload(self, now: int, doomed: Callable[[str], bool]) -> list[str]:
        """Forget every group `doomed(group_id)` selects: this node stopped leading their
        `__consumer_offsets` partition (Kafka's coordinator unloading on resignation).

        Their state stays in the log for the next leader. Writes handed out and not yet
        reported fail with NOT_COORDINATOR, and every parked JoinGroup and SyncGroup of
        their members is answered NOT_COORDINATOR, so clients look the coordinator up
        again. Returns the ids of the groups dropped."""
        self.outbox.abandon(now, doomed)
        dropped = self.membership.unload(now, doomed)
        for group_id in dropped:
            self.offsets.forget(group_id)
        return dropped

    # --- membership ---------------------------------------------------------------------------

    def join(self, now: int, req: JoinRequest, waiter: int) -> JoinResult | None:
        """The response now, or None when it is parked until the join phase ends."""
        return self.membership.join(now, req, waiter)

    def sync(self, now: int, req: SyncRequest, waiter: int) -> SyncResult | None:
        """The response now, or None until the leader's assignment is written."""
        return self.membership.sync(now, req, waiter)

    def heartbeat(
        self,
        now: int,
        group_id: str,
        member_id: str,
        generation: int,
        instance_id: str | None = None,
    ) -> ErrorCode:
        return self.membership.heartbeat(now, group_id, member_id, generation, instance_id)

    def leave(
        self, now: int, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, group.instance.id); one error per member."""
        return self.membership.leave(now, group_id, leaving)

    def list_groups(self, states: list[str], types: list[str]) -> list[ListedGroup]:
        """Groups matching the (case-insensitive) state and type filters; empty means any."""
        return self.membership.list_groups(states, types)

    def describe(self, group_id: str) -> GroupSummary | None:
        return self.membership.describe(group_id)

    # --- offsets ------------------------------------------------------------------------------

    def commit(self, now: int, req: CommitRequest, waiter: int) -> CommitResult | None:
        """OffsetCommit: the result now, or None until the offsets are written."""
        return self.offsets.commit(now, req, waiter)

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, OffsetEntry | None]]]]:
        """Committed offsets of the requested partitions (None: not committed), or all of them."""
        return self.offsets.fetch_offsets(group_id, topics)

    def txn_commit(self, now: int, req: TxnCommitRequest, waiter: int) -> CommitResult | None:
        """TxnOffsetCommit: the result now, or None until the transaction's offsets are
        written; they count once its COMMIT marker reaches the partition."""
        return self.offsets.txn_commit(now, req, waiter)

    def complete_transaction(
        self, producer_id: int, commit: bool, in_partition: Callable[[str], bool]
    ) -> int:
        """A COMMIT or ABORT marker of `producer_id` is in the `__consumer_offsets` partition
        whose groups `in_partition` selects: its transactional offsets there are committed or
        dropped. Returns how many it committed."""
        return self.offsets.complete_transaction(producer_id, commit, in_partition)

    def unstable_offsets(self, group_id: str) -> set[PartitionKey]:
        """Partitions whose offsets a transaction may still change (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return self.offsets.unstable(group_id)

    def delete_offsets(
        self, now: int, group_id: str, partitions: list[PartitionKey], waiter: int
    ) -> OffsetDeleteResult | None:
        """OffsetDelete: the result now, or None until the tombstones are written."""
        return self.offsets.delete_offsets(now, group_id, partitions, waiter)

    def expire_offsets(self, now: int) -> int:
        """offsets.retention.minutes; an empty group left without offsets is deleted too.

        Returns how many offsets it wrote tombstones for. Groups with a write in
        flight wait for the next check.
        """
        expired = 0
        busy = {f.write.group_id for f in self.outbox.in_flight()}
        for group in list(self.groups.values()):
            if group.state is GroupState.DEAD or group.group_id in busy:
                continue
            if self.offsets.has_pending(group.group_id):
                continue  # a transaction may still commit offsets for it
            doomed = self.offsets.expired(group, now)
            left = self.offsets.count(group.group_id) - len(doomed)
            idle = group.state is GroupState.EMPTY and not left and not group.pending
            if idle:
                self._delete(now, group, doomed, None)
            elif doomed:
                self.offsets.delete(group, doomed)
            expired += len(doomed)
        return expired

    # --- DeleteGroups -------------------------------------------------------------------------

    def delete_group(self, now: int, group_id: str, waiter: int) -> ErrorCode | None:
        """DeleteGroups for one group: the error now, or None until its tombstones are written."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        doomed = self.offsets.partitions(group_id)
        committing = dict.fromkeys(self.offsets.committing(group_id))
        doomed += [key for key in committing if key not in doomed]
        self._delete(now, group, doomed, waiter)
        return None

    def _delete(
        self, now: int, group: Group, doomed: list[PartitionKey], waiter: int | None
    ) -> None:
        """Tombstone the group and its offsets; Dead until written, Empty again if that fails."""
        written = partial(self._deletion_written, group, group.state_timestamp, waiter)
        self.membership.transition(group, GroupState.DEAD, now)
        batch = [*tombstones(group.group_id, doomed), (records.group_key(group.group_id), None)]
        self.outbox.write(group.group_id, batch, written)

    def _deletion_written(
        self, group: Group, empty_since: int, waiter: int | None, now: int, error: ErrorCode
    ) -> None:
        if error:
            log.info("group %s: Dead -> Empty (its deletion was not written)", group.group_id)
            group.state = GroupState.EMPTY
            group.state_timestamp = empty_since
            self.outbox.reply(waiter, error)
            return
        group.pending.clear()
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
            self.offsets.forget(group.group_id)
        self.outbox.reply(waiter, ErrorCode.NONE)
