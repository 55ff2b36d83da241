"""The classic group coordinator as a pure state machine (`GroupCoordinator`).

Split as Kafka splits it: `membership` (GroupMetadataManager: joins, syncs, heartbeats,
leaves, their timers) and `offset_store` (OffsetMetadataManager: committed offsets), composed
by `coordinator` (the shard: loading, unloading, group deletion, retention). `outbox` carries
the replies and writes both halves emit; `model` the group data they work on; `records` the
bytes of `__consumer_offsets`; `api` the requests, results and writes it takes and gives.
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
