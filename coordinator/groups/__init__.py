"""The classic group coordinator: a pure state machine (`GroupCoordinator`) and its trio driver.

See docs/groups.md for the design, the Kafka behaviours it follows and the
records it keeps in `__consumer_offsets`.
"""

from strom.coordinator.groups.api import (
    GroupConfig,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from strom.coordinator.groups.coordinator import GroupCoordinator
from strom.coordinator.groups.model import Group, GroupState, Member, OffsetEntry

__all__ = [
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinRequest",
    "JoinResult",
    "Member",
    "OffsetEntry",
    "SyncRequest",
    "SyncResult",
]
