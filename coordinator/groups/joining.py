"""JoinGroup: new and known members, KIP-394's member-id round trip, static members (KIP-345)."""

from __future__ import annotations

from strom.coordinator.groups.api import JoinRequest, JoinResult, SyncResult
from strom.coordinator.groups.base import CoordinatorBase
from strom.coordinator.groups.model import Group, GroupState, Member
from strom.wire.errors import ErrorCode

S = GroupState


class JoinMixin(CoordinatorBase):
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
            if group.state is S.DEAD:
                return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id)
            if not self._accepts(group, req.member_id):
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=req.member_id)
            if not req.member_id:
                return self._join_new(now, group, req, waiter)
            return self._join_known(now, group, req, waiter)
        finally:
            if created and not group.members and not group.pending and not group.has_offsets():
                self.groups.pop(group.group_id, None)
            self._schedule(group)

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
        if group.state is S.EMPTY:
            return True
        if group.state is S.PREPARING_REBALANCE:
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
        if group.state is S.PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        group.pending.pop(member_id, None)
        group.add(member)
        self.maybe_prepare_rebalance(now, group)

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
        if group.state is S.PREPARING_REBALANCE:
            self._update_member(now, group, member, req, waiter)
            return None
        if group.state is S.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # The member missed our response: hand it the same generation again.
                return self.join_result(group, member, leader_view=True)
            self._update_member(now, group, member, req, waiter)
            return None
        if group.state is S.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member(now, group, member, req, waiter)
                return None
            member.deadline = now + member.session_timeout_ms
            return self.join_result(group, member, leader_view=False)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _update_member(
        self, now: int, group: Group, member: Member, req: JoinRequest, waiter: int
    ) -> None:
        if member.join_waiter is not None and member.join_waiter != waiter:
            self._reply(
                member.join_waiter,
                JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id),
            )
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_waiter = waiter
        self.maybe_prepare_rebalance(now, group)

    def _replace_static(
        self, now: int, group: Group, old_id: str, new_id: str, req: JoinRequest, waiter: int
    ) -> JoinResult | None:
        """A known group.instance.id with a fresh member id: fence the old member, keep its place."""
        old = group.members[old_id]
        fenced = ErrorCode.FENCED_INSTANCE_ID
        if old.join_waiter is not None:
            self._reply(old.join_waiter, JoinResult(fenced, member_id=old_id))
        if old.sync_waiter is not None:
            self._reply(old.sync_waiter, SyncResult(fenced))
        old_protocols = old.protocols
        current_leader = group.leader or ""
        was_leader = group.leader == old_id
        was_pending_sync = old_id in group.pending_sync
        group.remove(old_id)
        member = Member(
            new_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
            list(req.protocols), assignment=old.assignment,
            deadline=now + req.session_timeout_ms,
        )  # fmt: skip
        group.add(member)
        if was_leader:
            group.leader = new_id
        if was_pending_sync:
            group.pending_sync.add(new_id)
        if group.state is S.STABLE:
            if group.select_protocol() == group.protocol_name:
                error = self.persist_group(group, now)
                if error:
                    # Undo: the old member stays as it was.
                    group.remove(new_id)
                    old.join_waiter = old.sync_waiter = None
                    old.protocols = old_protocols
                    group.add(old)
                    if was_leader:
                        group.leader = old_id
                    if was_pending_sync:
                        group.pending_sync.add(old_id)
                    return JoinResult(error, member_id=new_id)
                if not req.supports_skip_assignment:
                    # Before KIP-814 the leader is named as it was, so an old client that
                    # led the group does not run an assignment with no members.
                    result = self.join_result(group, member, leader_view=False)
                    result.leader = current_leader
                    return result
                leader = group.is_leader(new_id)
                return self.join_result(group, member, leader_view=True, skip=leader)
            member.join_waiter = waiter
            self.prepare_rebalance(now, group)
            return None
        member.join_waiter = waiter
        if group.state is S.COMPLETING_REBALANCE:
            self.prepare_rebalance(now, group)
        else:
            self.maybe_prepare_rebalance(now, group)
        return None
