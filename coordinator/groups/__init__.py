"""The classic group coordinator as a pure state machine (`GroupCoordinator`).

`coordinator` holds the whole state machine; `model` the group data it works on; `records`
the bytes of `__consumer_offsets`; `api` the requests, results and writes it takes and gives.
Its trio driver is `strom.broker.drivers.groups`. See docs/groups.md for the design, the Kafka
behaviours it follows and the records it keeps in `__consumer_offsets`.
"""

from strom.coordinator.groups.api import (
    GroupConfig,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
    Write,
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
    "Write",
]
