"""The data of a classic group (its members and state) and of a committed offset.

Plain data plus the small queries the rebalance logic asks of it (who has
rejoined, which protocol wins the vote). Nothing here changes state on its
own; `strom.coordinator.groups.membership` drives the transitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.formats.protocol.consumer_protocol_subscription import ConsumerProtocolSubscription

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE = "classic"


class GroupState(StrEnum):
    """Kafka's names, as ListGroups and DescribeGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: int | None = None
    """Token of the parked JoinGroup response, if the member is waiting in the join phase."""
    sync_waiter: int | None = None
    is_new: bool = False
    deadline: int = 0
    """When the member's session (or, while new, its first join) expires."""

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def expired(self, now: int) -> bool:
        """Members waiting for a response are bounded by the rebalance, not the session."""
        if self.sync_waiter is not None or (self.join_waiter is not None and not self.is_new):
            return False
        return now >= self.deadline


@dataclass(frozen=True, slots=True)
class OffsetEntry:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> current member id."""
    pending: dict[str, int] = field(default_factory=dict)
    """KIP-394: member ids handed out with MEMBER_ID_REQUIRED -> when they expire."""
    pending_sync: set[str] = field(default_factory=set)
    join_deadline: int | None = None
    initial_join: bool = False
    initial_delay_done: bool = False
    """The initial delay has passed; only members mid KIP-394 handshake are awaited."""
    initial_remaining_ms: int = 0
    new_member_added: bool = False
    sync_deadline: int | None = None
    subscribed_topics: frozenset[str] | None = None

    # --- membership queries -------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader == member_id

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_waiter is not None)

    def all_joined(self) -> bool:
        return not self.pending and self.awaiting_join() == len(self.members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static[member.group_instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static.get(member.group_instance_id) == member_id
        ):
            del self.static[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's static-aware member check used by sync, commit and heartbeat."""
        if instance_id is not None:
            known = self.static.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    # --- protocols ---------------------------------------------------------------------

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        common = self.candidate_protocols()
        return any(name in common for name, _ in protocols)

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the first member's order."""
        members = list(self.members.values())
        if not members:
            return []
        names = [name for name, _ in members[0].protocols]
        return [n for n in names if all(any(p == n for p, _ in m.protocols) for m in members[1:])]

    def select_protocol(self) -> str | None:
        """Each member votes for its most preferred common protocol; most votes wins."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = dict.fromkeys(candidates, 0)
        for member in self.members.values():
            choice = next((name for name, _ in member.protocols if name in votes), None)
            if choice is not None:
                votes[choice] += 1
        if not votes:
            return None
        return max(votes, key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics of a consumer group's subscriptions; None when they cannot be read."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def is_subscribed(self, topic: str) -> bool:
        if self.state is GroupState.EMPTY:
            return False
        return self.subscribed_topics is None or topic in self.subscribed_topics


def parse_subscription(data: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (newer versions read as the newest known)."""
    if len(data) < 2:
        return None
    version = min(int.from_bytes(data[:2], "big", signed=True), 3)
    if version < 0:
        return None
    try:
        return list(ConsumerProtocolSubscription.decode(memoryview(data)[2:], version).topics)
    except ProtocolError:
        return None
