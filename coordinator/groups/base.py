"""The core of the classic group state machine: transitions, timers and parked replies.

Time comes in as `now` (ms) on every call; member ids from the injected
`new_id`; records go to the injected `sink`. Responses the state machine holds
back (JoinGroup until the join phase ends, SyncGroup until the leader's
assignment arrives) are identified by waiter tokens from the caller and come
out of `take_replies()` when released. `tick(now)` fires every deadline that
has passed: initial and regular join deadlines, pending-sync expiry, session
and KIP-394 pending-member expiry. `next_deadline()` says when to call it next.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from strom.coordinator.groups import records
from strom.coordinator.groups.api import (
    GroupConfig,
    JoinMember,
    JoinResult,
    RecordSink,
    Reply,
    SyncResult,
)
from strom.coordinator.groups.model import Group, GroupState, Member
from strom.wire.errors import ErrorCode

log = logging.getLogger("strom.groups")
S = GroupState


class CoordinatorBase:
    def __init__(self, config: GroupConfig, sink: RecordSink, new_id: Callable[[], str]) -> None:
        self.config = config
        self.sink = sink
        self.new_id = new_id
        self.groups: dict[str, Group] = {}
        self._replies: list[Reply] = []
        self._wakeups: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}

    # --- plumbing ----------------------------------------------------------------------------

    def take_replies(self) -> list[Reply]:
        out, self._replies = self._replies, []
        return out

    def _reply(self, waiter: int | None, result: JoinResult | SyncResult) -> None:
        if waiter is not None:
            self._replies.append((waiter, result))

    def _schedule(self, group: Group) -> None:
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
                self._schedule(group)

    def _transition(self, group: Group, state: GroupState, now: int) -> None:
        log.info(
            "group %s: %s -> %s (generation %d, %d members)",
            group.group_id, group.state.value, state.value, group.generation, len(group.members),
        )
        group.state = state
        group.state_timestamp = now

    def persist_group(
        self, group: Group, now: int, assignments: dict[str, bytes] | None = None
    ) -> ErrorCode:
        error = self.sink(group.group_id, [records.group_record(group, now, assignments)])
        if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return error

    # --- timers --------------------------------------------------------------------------------

    def _fire(self, now: int, group: Group) -> None:
        for member_id, deadline in list(group.pending.items()):
            if now >= deadline:
                del group.pending[member_id]
                if group.state is S.PREPARING_REBALANCE:
                    self._maybe_complete_join(now, group)
        for member in list(group.members.values()):
            if member.member_id in group.members and member.expired(now):
                log.info("group %s: member %s session expired", group.group_id, member.member_id)
                self.remove_member_and_rebalance(now, group, member.member_id)
        joining = group.state is S.PREPARING_REBALANCE and group.join_deadline is not None
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
        self.complete_join(now, group)

    def _expire_pending_sync(self, now: int, group: Group) -> None:
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: members %s never sent SyncGroup", group.group_id, missing)
        for member_id in missing:
            self._drop_member(group, member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        self.prepare_rebalance(now, group)

    # --- transitions ---------------------------------------------------------------------------

    def prepare_rebalance(self, now: int, group: Group) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self._reset_assignments(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline = None
        if group.state is S.EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join = True
            group.initial_delay_done = False
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = now + delay
        else:
            group.initial_join = False
            group.join_deadline = now + group.rebalance_timeout_ms()
        self._transition(group, S.PREPARING_REBALANCE, now)
        self._schedule(group)
        self._maybe_complete_join(now, group)  # e.g. the only member rejoined

    def _reset_assignments(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                self._reply(member.sync_waiter, SyncResult(error))
                member.sync_waiter = None

    def maybe_prepare_rebalance(self, now: int, group: Group) -> None:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self.prepare_rebalance(now, group)
        elif group.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(now, group)

    def _maybe_complete_join(self, now: int, group: Group) -> None:
        waiting = group.initial_join and not group.initial_delay_done
        if group.state is S.PREPARING_REBALANCE and group.all_joined() and not waiting:
            self.complete_join(now, group)

    def complete_join(self, now: int, group: Group) -> None:
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
            self._transition(group, S.EMPTY, now)
            error = self.persist_group(group, now)
            if error:
                log.warning(
                    "group %s: storing the empty group failed: %s", group.group_id, error.name
                )
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        self._transition(group, S.COMPLETING_REBALANCE, now)
        for member in group.members.values():
            if member.join_waiter is not None:
                self._reply(member.join_waiter, self.join_result(group, member, leader_view=True))
                member.join_waiter = None
                member.is_new = False
                member.deadline = now + member.session_timeout_ms
        group.pending_sync = set(group.members)
        group.sync_deadline = now + group.rebalance_timeout_ms()

    def join_result(
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

    def _drop_member(self, group: Group, member_id: str, error: ErrorCode) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        if member.join_waiter is not None:
            self._reply(member.join_waiter, JoinResult(error, member_id=member_id))
        if member.sync_waiter is not None:
            self._reply(member.sync_waiter, SyncResult(error))

    def remove_member_and_rebalance(self, now: int, group: Group, member_id: str) -> None:
        self._drop_member(group, member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.prepare_rebalance(now, group)
        elif group.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(now, group)


def _group_deadline(group: Group) -> int | None:
    times: list[int | None] = list(group.pending.values())
    times += [_member_deadline(m) for m in group.members.values()]
    if group.state is S.PREPARING_REBALANCE and group.join_deadline is not None:
        times.append(group.join_deadline)
    if group.sync_deadline is not None:
        times.append(group.sync_deadline)
    found = [t for t in times if t is not None]
    return min(found) if found else None


def _member_deadline(member: Member) -> int | None:
    if member.sync_waiter is not None or (member.join_waiter is not None and not member.is_new):
        return None
    return member.deadline
