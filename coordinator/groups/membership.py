"""`GroupMembership`: the membership half of the classic group coordinator.

Kafka's GroupMetadataManager: who is in each group, the rebalance protocol
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the timers that drive it and the
group metadata record. Committed offsets are the other half
(`strom.coordinator.groups.offset_store`); `GroupCoordinator` composes the two.

It holds `groups`, the group objects both halves read. Time comes in as `now`,
member ids from `new_id`; replies and records go out through the shared `Outbox`.
`next_deadline()` says when `tick` next has work (initial and regular join
deadlines, pending-sync expiry, session and KIP-394 pending-member expiry).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from strom.coordinator.groups import records
from strom.coordinator.groups.api import (
    GroupConfig,
    GroupSummary,
    JoinMember,
    JoinRequest,
    JoinResult,
    ListedGroup,
    MemberSummary,
    SyncRequest,
    SyncResult,
)
from strom.coordinator.groups.model import GROUP_TYPE, Group, GroupState, Member
from strom.coordinator.groups.outbox import Outbox, ignore_outcome
from strom.wire.errors import ErrorCode
from strom.wire.formats.group_coordinator.group_metadata_value import GroupMetadataValue

log = logging.getLogger("strom.groups")


@dataclass
class _StaticRestart:
    """A static member's restart in a Stable group, staged until its new member id is written."""

    group: Group
    old: Member
    new: Member
    old_protocols: list[tuple[str, bytes]]
    leader_before: str
    was_leader: bool
    was_pending_sync: bool
    req: JoinRequest
    waiter: int


class GroupMembership:
    def __init__(self, config: GroupConfig, new_id: Callable[[], str], outbox: Outbox) -> None:
        self.config = config
        self.new_id = new_id
        self.outbox = outbox
        self.groups: dict[str, Group] = {}
        self.rebalances = 0
        """Rebalances begun (groups entering PreparingRebalance), for the broker's metrics."""
        self._wakeups: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        self._syncing: set[tuple[str, int]] = set()
        """(group, generation) whose leader's assignment is being written."""

    # --- timers -------------------------------------------------------------------------------

    def schedule(self, group: Group) -> None:
        """Make sure a wake-up at or before the group's earliest deadline is queued."""
        deadline = _group_deadline(group)
        queued = self._scheduled.get(group.group_id)
        if deadline is not None and (queued is None or deadline < queued):
            self._scheduled[group.group_id] = deadline
            heapq.heappush(self._wakeups, (deadline, group.group_id))

    def next_deadline(self) -> int | None:
        """When `tick` next has work (possibly a little early, never late)."""
        return self._wakeups[0][0] if self._wakeups else None

    def tick(self, now: int) -> None:
        """Fire every deadline at or before `now`."""
        while self._wakeups and self._wakeups[0][0] <= now:
            deadline, group_id = heapq.heappop(self._wakeups)
            if self._scheduled.get(group_id) != deadline:
                continue  # superseded by an earlier wake-up
            del self._scheduled[group_id]
            group = self.groups.get(group_id)
            if group is not None:
                self._fire(now, group)
                self.schedule(group)

    def _fire(self, now: int, group: Group) -> None:
        for member_id, deadline in list(group.pending.items()):
            if now >= deadline:
                del group.pending[member_id]
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._maybe_complete_join(now, group)
        for member in list(group.members.values()):
            if member.member_id in group.members and member.expired(now):
                log.info("group %s: member %s session expired", group.group_id, member.member_id)
                self._remove_member_and_rebalance(now, group, member.member_id)
        joining = group.state is GroupState.PREPARING_REBALANCE and group.join_deadline is not None
        if joining and now >= (group.join_deadline or 0):
            self._join_deadline(now, group)
        if group.sync_deadline is not None and now >= group.sync_deadline:
            group.sync_deadline = None
            self._expire_pending_sync(now, group)

    def _join_deadline(self, now: int, group: Group) -> None:
        if group.initial_join and group.new_member_added and group.initial_remaining_ms > 0:
            # group.initial.rebalance.delay.ms: new members keep arriving, wait a bit more
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - delay, 0)
            group.join_deadline = now + delay
            return
        if group.initial_join and group.pending and group.initial_remaining_ms > 0:
            # Members that just got MEMBER_ID_REQUIRED are one round trip from joining: wait
            # for them (or their expiry) rather than form a generation they must then break.
            group.initial_delay_done = True
            wait = min(min(group.pending.values()) - now, group.initial_remaining_ms)
            group.initial_remaining_ms -= max(wait, 0)
            group.join_deadline = now + max(wait, 0)
            return
        self._complete_join(now, group)

    def _expire_pending_sync(self, now: int, group: Group) -> None:
        if (
            group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            or not group.pending_sync
        ):
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: members %s never sent SyncGroup", group.group_id, missing)
        for member_id in missing:
            self._drop_member(group, member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        self._prepare_rebalance(now, group)

    # --- JoinGroup: new and known members, KIP-394, static members (KIP-345) ----------------

    def join(self, now: int, req: JoinRequest, waiter: int) -> JoinResult | None:
        """The response now, or None when it is parked until the join phase ends."""
        error = self._check_join(req)
        if error:
            return JoinResult(error, member_id=req.member_id)
        group = self.groups.get(req.group_id)
        created = group is None
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            group = self.groups[req.group_id] = Group(req.group_id, state_timestamp=now)
        try:
            if group.state is GroupState.DEAD:
                return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id)
            if not self._accepts(group, req.member_id):
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=req.member_id)
            if not req.member_id:
                return self._join_new(now, group, req, waiter)
            return self._join_known(now, group, req, waiter)
        finally:
            if created and not group.members and not group.pending:  # a new group has no offsets
                self.groups.pop(group.group_id, None)
            self.schedule(group)

    def _check_join(self, req: JoinRequest) -> ErrorCode:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return ErrorCode.INVALID_SESSION_TIMEOUT
        if not req.protocol_type or not req.protocols:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _accepts(self, group: Group, member_id: str) -> bool:
        """group.max.size: members already in the group may always rejoin."""
        limit = self.config.max_size
        if group.state is GroupState.EMPTY:
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (
                member is not None and member.join_waiter is not None
            ) or group.awaiting_join() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new(self, now: int, group: Group, req: JoinRequest, waiter: int) -> JoinResult | None:
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member_id = f"{req.group_instance_id or req.client_id}-{self.new_id()}"
        if req.group_instance_id is not None:
            known = group.static.get(req.group_instance_id)
            if known is not None:
                return self._replace_static(now, group, known, member_id, req, waiter)
        elif req.require_known_member_id:
            group.pending[member_id] = now + req.session_timeout_ms
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        self._add_member(now, group, member_id, req, waiter)
        return None

    def _add_member(
        self, now: int, group: Group, member_id: str, req: JoinRequest, waiter: int
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            join_waiter=waiter,
            is_new=True,
            deadline=now + self.config.new_member_join_timeout_ms,
        )
        if group.state is GroupState.PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        group.pending.pop(member_id, None)
        group.add(member)
        self._maybe_prepare_rebalance(now, group)

    def _join_known(
        self, now: int, group: Group, req: JoinRequest, waiter: int
    ) -> JoinResult | None:
        member_id = req.member_id
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if member_id in group.pending:
            self._add_member(now, group, member_id, req, waiter)
            return None
        error = group.validate_member(member_id, req.group_instance_id)
        if error:
            return JoinResult(error, member_id=member_id)
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(now, group, member, req, waiter)
            return None
        if group.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # The member missed our response: hand it the same generation again.
                return self._join_result(group, member, leader_view=True)
            self._update_member(now, group, member, req, waiter)
            return None
        if group.state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member(now, group, member, req, waiter)
                return None
            member.deadline = now + member.session_timeout_ms
            return self._join_result(group, member, leader_view=False)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _update_member(
        self, now: int, group: Group, member: Member, req: JoinRequest, waiter: int
    ) -> None:
        if member.join_waiter is not None and member.join_waiter != waiter:
            self.outbox.reply(
                member.join_waiter,
                JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id),
            )
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_waiter = waiter
        self._maybe_prepare_rebalance(now, group)

    def _replace_static(
        self, now: int, group: Group, old_id: str, new_id: str, req: JoinRequest, waiter: int
    ) -> JoinResult | None:
        """A known group.instance.id with a fresh member id: fence the old member, keep its place."""
        old = group.members[old_id]
        fenced = ErrorCode.FENCED_INSTANCE_ID
        if old.join_waiter is not None:
            self.outbox.reply(old.join_waiter, JoinResult(fenced, member_id=old_id))
        if old.sync_waiter is not None:
            self.outbox.reply(old.sync_waiter, SyncResult(fenced))
        member = Member(
            new_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
            list(req.protocols), assignment=old.assignment,
            deadline=now + req.session_timeout_ms,
        )  # fmt: skip
        staged = _StaticRestart(
            group, old, member, old.protocols, group.leader or "", group.leader == old_id,
            old_id in group.pending_sync, req, waiter,
        )  # fmt: skip
        group.remove(old_id)
        group.add(member)
        if staged.was_leader:
            group.leader = new_id
        if staged.was_pending_sync:
            group.pending_sync.add(new_id)
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            # No rebalance: the member is answered once its new member id is written.
            written = partial(self._static_restart_written, staged)
            self.outbox.write(group.group_id, [records.group_record(group, now)], written)
            return None
        member.join_waiter = waiter
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, group)
        else:
            self._maybe_prepare_rebalance(now, group)
        return None

    def _static_restart_written(self, staged: _StaticRestart, now: int, error: ErrorCode) -> None:
        group, old, new = staged.group, staged.old, staged.new
        if error:
            if self.groups.get(group.group_id) is group and group.members.get(new.member_id) is new:
                # Undo: the old member stays as it was.
                self._drop_member(group, new.member_id, error)
                old.join_waiter = old.sync_waiter = None
                old.protocols = staged.old_protocols
                group.add(old)
                if staged.was_leader:
                    group.leader = old.member_id
                if staged.was_pending_sync:
                    group.pending_sync.add(old.member_id)
            self.outbox.reply(staged.waiter, JoinResult(error, member_id=new.member_id))
            return
        req = staged.req
        error = group.validate_member(new.member_id, req.group_instance_id)
        if error:  # replaced again or removed while the write was in flight
            self.outbox.reply(staged.waiter, JoinResult(error, member_id=new.member_id))
        elif not req.supports_skip_assignment:
            # Before KIP-814 the leader is named as it was, so an old client that
            # led the group does not run an assignment with no members.
            result = self._join_result(group, new, leader_view=False)
            result.leader = staged.leader_before
            self.outbox.reply(staged.waiter, result)
        else:
            skip = group.is_leader(new.member_id)
            self.outbox.reply(
                staged.waiter, self._join_result(group, new, leader_view=True, skip=skip)
            )

    def _join_result(
        self, group: Group, member: Member, *, leader_view: bool, skip: bool = False
    ) -> JoinResult:
        members = []
        if leader_view and group.is_leader(member.member_id):
            members = [
                JoinMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader or "",
            members=members,
            skip_assignment=skip,
        )

    # --- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------

    def sync(self, now: int, req: SyncRequest, waiter: int) -> SyncResult | None:
        """The response now, or None until the leader's assignment is written."""
        group = self.groups.get(req.group_id)
        if not req.group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        try:
            return self._sync(now, group, req, waiter)
        finally:
            self.schedule(group)

    def _sync(self, now: int, group: Group, req: SyncRequest, waiter: int) -> SyncResult | None:
        if group.state is GroupState.DEAD:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error:
            return SyncResult(error)
        if req.generation != group.generation:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if req.protocol_type is not None and req.protocol_type != group.protocol_type:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if req.protocol_name is not None and req.protocol_name != group.protocol_name:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[req.member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is GroupState.STABLE:
            self._synced(group, req.member_id)
            member.deadline = now + member.session_timeout_ms
            return self._sync_result(group, member.assignment)
        if group.state is not GroupState.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if member.sync_waiter is not None and member.sync_waiter != waiter:
            self.outbox.reply(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        self._synced(group, req.member_id)
        syncing = (group.group_id, group.generation)
        if group.is_leader(req.member_id) and syncing not in self._syncing:
            # The members are answered once the leader's assignment is written.
            assignments = {m: req.assignments.get(m, b"") for m in group.members}
            self._syncing.add(syncing)
            written = partial(self._assignment_written, group, group.generation, assignments)
            self.outbox.write(
                group.group_id, [records.group_record(group, now, assignments)], written
            )
        return None

    def _assignment_written(
        self,
        group: Group,
        generation: int,
        assignments: dict[str, bytes],
        now: int,
        error: ErrorCode,
    ) -> None:
        self._syncing.discard((group.group_id, generation))
        current = self.groups.get(group.group_id) is group and group.generation == generation
        if not current or group.state is not GroupState.COMPLETING_REBALANCE:
            return  # a rebalance began meanwhile and answered the waiters
        if error:
            self._reset_assignments(group, error)
            self._maybe_prepare_rebalance(now, group)
            return
        for member_id, assignment in assignments.items():
            target = group.members[member_id]
            target.assignment = assignment
            if target.sync_waiter is not None:
                self.outbox.reply(target.sync_waiter, self._sync_result(group, assignment))
                target.sync_waiter = None
                target.deadline = now + target.session_timeout_ms
        self.transition(group, GroupState.STABLE, now)

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None

    @staticmethod
    def _sync_result(group: Group, assignment: bytes) -> SyncResult:
        return SyncResult(ErrorCode.NONE, assignment, group.protocol_type, group.protocol_name)

    def heartbeat(
        self,
        now: int,
        group_id: str,
        member_id: str,
        generation: int,
        instance_id: str | None = None,
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        member.deadline = now + member.session_timeout_ms
        self.schedule(group)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(
        self, now: int, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, group.instance.id); one error per member."""
        group = self.groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in leaving]
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = [
            self._leave_one(now, group, member_id, instance) for member_id, instance in leaving
        ]
        self.schedule(group)
        return ErrorCode.NONE, results

    def _leave_one(
        self, now: int, group: Group, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if member_id and member_id in group.pending:
            del group.pending[member_id]
            if group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_prepare_rebalance(now, group)
            return ErrorCode.NONE
        if instance_id is not None:
            known = group.static.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member_and_rebalance(now, group, member_id)
        return ErrorCode.NONE

    # --- transitions --------------------------------------------------------------------------

    def transition(self, group: Group, state: GroupState, now: int) -> None:
        log.info(
            "group %s: %s -> %s (generation %d, %d members)",
            group.group_id, group.state.value, state.value, group.generation, len(group.members),
        )  # fmt: skip
        group.state = state
        group.state_timestamp = now

    def _prepare_rebalance(self, now: int, group: Group) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_assignments(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline = None
        if group.state is GroupState.EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join = True
            group.initial_delay_done = False
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = now + delay
        else:
            group.initial_join = False
            group.join_deadline = now + group.rebalance_timeout_ms()
        self.rebalances += 1
        self.transition(group, GroupState.PREPARING_REBALANCE, now)
        self.schedule(group)
        self._maybe_complete_join(now, group)  # e.g. the only member rejoined

    def _reset_assignments(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                self.outbox.reply(member.sync_waiter, SyncResult(error))
                member.sync_waiter = None

    def _maybe_prepare_rebalance(self, now: int, group: Group) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(now, group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now, group)

    def _maybe_complete_join(self, now: int, group: Group) -> None:
        waiting = group.initial_join and not group.initial_delay_done
        if group.state is GroupState.PREPARING_REBALANCE and group.all_joined() and not waiting:
            self._complete_join(now, group)

    def _complete_join(self, now: int, group: Group) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start a generation."""
        for member in list(group.members.values()):
            if member.join_waiter is None and member.group_instance_id is None:
                group.remove(member.member_id)
        leader = group.members.get(group.leader) if group.leader else None
        if leader is not None and leader.join_waiter is None:
            joined = next((m for m in group.members.values() if m.join_waiter is not None), None)
            group.leader = joined.member_id if joined else group.leader
            leader = joined
        if leader is None and group.members:
            # Only static members that have not rejoined remain: wait for them or their sessions.
            group.join_deadline = now + group.rebalance_timeout_ms()
            group.initial_join = False
            return
        group.join_deadline = None
        group.initial_join = False
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = None
            self.transition(group, GroupState.EMPTY, now)
            self.outbox.write(group.group_id, [records.group_record(group, now)], ignore_outcome)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        self.transition(group, GroupState.COMPLETING_REBALANCE, now)
        for member in group.members.values():
            if member.join_waiter is not None:
                self.outbox.reply(
                    member.join_waiter, self._join_result(group, member, leader_view=True)
                )
                member.join_waiter = None
                member.is_new = False
                member.deadline = now + member.session_timeout_ms
        group.pending_sync = set(group.members)
        group.sync_deadline = now + group.rebalance_timeout_ms()

    def _drop_member(self, group: Group, member_id: str, error: ErrorCode) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        if member.join_waiter is not None:
            self.outbox.reply(member.join_waiter, JoinResult(error, member_id=member_id))
        if member.sync_waiter is not None:
            self.outbox.reply(member.sync_waiter, SyncResult(error))

    def _remove_member_and_rebalance(self, now: int, group: Group, member_id: str) -> None:
        self._drop_member(group, member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now, group)

    # --- ListGroups, DescribeGroups ----------------------------------------------------------

    def list_groups(self, states: list[str], types: list[str]) -> list[ListedGroup]:
        """Groups matching the (case-insensitive) state and type filters; empty means any."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and GROUP_TYPE not in wanted_types:
            return []
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value, GROUP_TYPE)
            for g in self.groups.values()
            if g.state is not GroupState.DEAD
            and (not wanted_states or g.state.value.lower() in wanted_states)
        ]

    def describe(self, group_id: str) -> GroupSummary | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        stable = group.state is GroupState.STABLE
        members = [
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment,  # kept outside Stable, as Kafka 4.1 describes members
            )
            for m in group.members.values()
        ]
        return GroupSummary(
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def unload(self, now: int, doomed: Callable[[str], bool]) -> list[str]:
        """Forget the groups `doomed` selects, answering every parked JoinGroup and
        SyncGroup of their members NOT_COORDINATOR. Returns the ids dropped."""
        dropped = [group_id for group_id in self.groups if doomed(group_id)]
        for group_id in dropped:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                if member.join_waiter is not None:
                    self.outbox.reply(
                        member.join_waiter,
                        JoinResult(ErrorCode.NOT_COORDINATOR, member_id=member.member_id),
                    )
                    member.join_waiter = None
                if member.sync_waiter is not None:
                    self.outbox.reply(member.sync_waiter, SyncResult(ErrorCode.NOT_COORDINATOR))
                    member.sync_waiter = None
            self._scheduled.pop(group_id, None)
        self._syncing = {key for key in self._syncing if not doomed(key[0])}
        return dropped


def restore(group: Group, value: GroupMetadataValue, now: int) -> None:
    group.protocol_type = value.protocol_type or None
    group.generation = value.generation
    group.protocol_name = value.protocol
    if value.current_state_timestamp >= 0:
        group.state_timestamp = value.current_state_timestamp
    for m in value.members:
        protocols = [(value.protocol, m.subscription)] if value.protocol else []
        rebalance = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
        group.add(
            Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance,
                m.session_timeout, group.protocol_type or "", protocols, m.assignment,
                deadline=now + m.session_timeout,
            )
        )  # fmt: skip
    group.leader = (
        value.leader if value.leader in group.members else next(iter(group.members), None)
    )
    if group.members:
        group.state = GroupState.STABLE
        group.subscribed_topics = group.compute_subscribed_topics()
    else:
        group.state = GroupState.EMPTY


def _group_deadline(group: Group) -> int | None:
    times: list[int | None] = list(group.pending.values())
    times += [_member_deadline(m) for m in group.members.values()]
    if group.state is GroupState.PREPARING_REBALANCE and group.join_deadline is not None:
        times.append(group.join_deadline)
    if group.sync_deadline is not None:
        times.append(group.sync_deadline)
    found = [t for t in times if t is not None]
    return min(found) if found else None


def _member_deadline(member: Member) -> int | None:
    if member.sync_waiter is not None or (member.join_waiter is not None and not member.is_new):
        return None
    return member.deadline
