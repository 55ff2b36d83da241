"""ListGroups, DescribeGroups and DeleteGroups."""

from __future__ import annotations

from strom.coordinator.groups import records
from strom.coordinator.groups.api import GroupSummary, KeyValue, ListedGroup, MemberSummary
from strom.coordinator.groups.model import GROUP_TYPE, GroupState
from strom.coordinator.groups.offsets import OffsetsMixin
from strom.wire.errors import ErrorCode

S = GroupState


class AdminMixin(OffsetsMixin):
    def list_groups(self, states: list[str], types: list[str]) -> list[ListedGroup]:
        """Groups matching the (case-insensitive) state and type filters; empty means any."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and GROUP_TYPE not in wanted_types:
            return []
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value, GROUP_TYPE)
            for g in self.groups.values()
            if g.state is not S.DEAD
            and (not wanted_states or g.state.value.lower() in wanted_states)
        ]

    def describe(self, group_id: str) -> GroupSummary | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        stable = group.state is S.STABLE
        members = [
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
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

    def delete_groups(self, now: int, group_ids: list[str]) -> dict[str, ErrorCode]:
        return {group_id: self._delete_group(now, group_id) for group_id in group_ids}

    def _delete_group(self, now: int, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not S.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        doomed = [(t, p) for t, parts in group.offsets.items() for p in parts]
        tombstone: list[KeyValue] = [(records.group_key(group_id), None)]
        error = self._remove_offsets(group, doomed, tombstone)
        if error:
            return error
        self._transition(group, S.DEAD, now)
        for member_id in list(group.pending):
            del group.pending[member_id]
        del self.groups[group_id]
        return ErrorCode.NONE
