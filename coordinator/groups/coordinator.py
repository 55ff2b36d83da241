"""`GroupCoordinator`: every classic group of this node, as one pure state machine.

Requests and `tick(now)` drive it; it never reads a clock, opens a socket or
draws a random number (member ids come from `new_id`). `load` rebuilds the
groups from the records of `__consumer_offsets`, in log order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from strom.coordinator.groups.admin import AdminMixin
from strom.coordinator.groups.api import GroupConfig, RecordSink
from strom.coordinator.groups.joining import JoinMixin
from strom.coordinator.groups.membership import MembershipMixin
from strom.coordinator.groups.model import Group, GroupState, Member
from strom.coordinator.groups.records import GroupRecord, OffsetRecord
from strom.wire.formats.group_coordinator.group_metadata_value import GroupMetadataValue

S = GroupState


class GroupCoordinator(JoinMixin, MembershipMixin, AdminMixin):
    def __init__(self, config: GroupConfig, sink: RecordSink, new_id: Callable[[], str]) -> None:
        super().__init__(config, sink, new_id)

    def load(self, loaded: Iterable[OffsetRecord | GroupRecord], now: int) -> None:
        """Replay records (last one per key wins) and bring the groups back.

        A group with members comes back Stable with fresh session timers, so its
        members carry on with their generation after a broker restart.
        """
        metadata: dict[str, GroupMetadataValue | None] = {}
        offsets: dict[str, dict[str, dict[int, OffsetRecord]]] = {}
        for record in loaded:
            if isinstance(record, GroupRecord):
                metadata[record.group_id] = record.value
            else:
                parts = offsets.setdefault(record.group_id, {}).setdefault(record.topic, {})
                if record.entry is None:
                    parts.pop(record.partition, None)
                else:
                    parts[record.partition] = record
        for group_id in sorted(set(metadata) | set(offsets)):
            value = metadata.get(group_id)
            group_offsets = {
                topic: {p: r.entry for p, r in parts.items() if r.entry is not None}
                for topic, parts in offsets.get(group_id, {}).items()
                if parts
            }
            if value is None and not group_offsets:
                continue
            group = Group(group_id, state_timestamp=now)
            group.offsets = group_offsets
            if value is not None:
                _restore(group, value, now)
            self.groups[group_id] = group
            self._schedule(group)


def _restore(group: Group, value: GroupMetadataValue, now: int) -> None:
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
        group.state = S.STABLE
        group.subscribed_topics = group.compute_subscribed_topics()
    else:
        group.state = S.EMPTY
