"""What the group state machine takes and gives: protocol-neutral requests and results.

Handlers translate between these and the wire messages of each version, so the
state machine never looks at an API version except through the two flags a
version changes in behaviour (KIP-394's member-id round trip, KIP-814's skip
assignment).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.wire.errors import ErrorCode

KeyValue = tuple[bytes, bytes | None]
PartitionKey = tuple[str, int]
"""(topic, partition) of a committed offset."""

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
"""Kafka's bound on a new member's first join (group.classic.new.member.join.timeout)."""


@dataclass(frozen=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    """JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394)."""
    supports_skip_assignment: bool = True
    """JoinGroup v9+: a rejoining static leader gets the members and skip_assignment (KIP-814)."""


@dataclass
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[JoinMember] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncRequest:
    group_id: str
    member_id: str
    generation: int
    assignments: dict[str, bytes]
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass
class CommitRequest:
    group_id: str
    generation: int
    member_id: str
    partitions: list[CommitPartition]
    group_instance_id: str | None = None
    retention_ms: int = -1
    group_must_exist: bool = False
    """OffsetCommit v9+: GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION for a missing group."""


@dataclass
class TxnCommitRequest:
    """TxnOffsetCommit: offsets a transaction commits, visible once its COMMIT marker is in
    the group's partition."""

    group_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[CommitPartition]
    generation: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: list[MemberSummary]


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass
class CommitResult:
    """OffsetCommit: one error per (topic, partition)."""

    errors: dict[PartitionKey, ErrorCode]


@dataclass
class OffsetDeleteResult:
    """OffsetDelete: a group-level error, else one error per (topic, partition)."""

    error: ErrorCode
    partitions: dict[PartitionKey, ErrorCode] = field(default_factory=dict)


Released = JoinResult | SyncResult | CommitResult | OffsetDeleteResult | ErrorCode
"""What a parked response can be; DeleteGroups' per-group answer is a bare ErrorCode."""

Reply = tuple[int, Released]
"""A parked response released by the state machine: (waiter token, result)."""


@dataclass(frozen=True)
class Write:
    """Records to append, as one batch, to the group's `__consumer_offsets` partition.

    The state machine acts on them (and releases the replies waiting on them)
    only when the caller reports the outcome with `write_completed(now, token, error)`.
    Writes complete in the order they were emitted.
    """

    token: int
    group_id: str
    records: list[KeyValue]
    producer: tuple[int, int] | None = None
    """(producer id, epoch) of a transaction's offsets: written as its transactional batch."""
