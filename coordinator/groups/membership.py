"""SyncGroup, Heartbeat and LeaveGroup."""

from __future__ import annotations

from strom.coordinator.groups.api import SyncRequest, SyncResult
from strom.coordinator.groups.base import CoordinatorBase
from strom.coordinator.groups.model import Group, GroupState
from strom.wire.errors import ErrorCode

S = GroupState


class MembershipMixin(CoordinatorBase):
    def sync(self, now: int, req: SyncRequest, waiter: int) -> SyncResult | None:
        """The response now, or None while the leader's assignment is awaited."""
        group = self.groups.get(req.group_id)
        if not req.group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        try:
            return self._sync(now, group, req, waiter)
        finally:
            self._schedule(group)

    def _sync(self, now: int, group: Group, req: SyncRequest, waiter: int) -> SyncResult | None:
        if group.state is S.DEAD:
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
        if group.state is S.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is S.STABLE:
            self._synced(group, req.member_id)
            member.deadline = now + member.session_timeout_ms
            return self._sync_result(group, member.assignment)
        if group.state is not S.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if member.sync_waiter is not None and member.sync_waiter != waiter:
            self._reply(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        self._synced(group, req.member_id)
        if group.is_leader(req.member_id):
            assignments = {m: req.assignments.get(m, b"") for m in group.members}
            error = self.persist_group(group, now, assignments)
            if error:
                self._reset_assignments(group, error)
                self.maybe_prepare_rebalance(now, group)
                return None
            for member_id, assignment in assignments.items():
                target = group.members[member_id]
                target.assignment = assignment
                if target.sync_waiter is not None:
                    self._reply(target.sync_waiter, self._sync_result(group, assignment))
                    target.sync_waiter = None
                    target.deadline = now + target.session_timeout_ms
            self._transition(group, S.STABLE, now)
        return None

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
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        member.deadline = now + member.session_timeout_ms
        self._schedule(group)
        if group.state is S.PREPARING_REBALANCE:
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
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = [
            self._leave_one(now, group, member_id, instance) for member_id, instance in leaving
        ]
        self._schedule(group)
        return ErrorCode.NONE, results

    def _leave_one(
        self, now: int, group: Group, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if member_id and member_id in group.pending:
            del group.pending[member_id]
            if group.state is S.PREPARING_REBALANCE:
                self.maybe_prepare_rebalance(now, group)
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
        self.remove_member_and_rebalance(now, group, member_id)
        return ErrorCode.NONE
