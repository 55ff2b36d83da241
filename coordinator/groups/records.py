"""The records of `__consumer_offsets`, in Kafka's own formats.

Key and value are each an int16 schema version followed by the generated
message body, so Kafka's tools (kafka-console-consumer with the offsets
formatter, kafka-dump-log) read them:

| record | key | value |
|---|---|---|
| committed offset | v1 `OffsetCommitKey(group, topic, partition)` | v3 `OffsetCommitValue` (v1 when the commit carried a retention time) |
| group metadata | v2 `GroupMetadataKey(group)` | v3 `GroupMetadataValue` |
| delete | the same key | null (a tombstone; compaction drops both) |

A TxnOffsetCommit's offset records are the same, written as a transactional batch of its
producer; they count once that producer's COMMIT marker (a control batch the transaction
coordinator has the partition's leader write) follows them, and never after an ABORT.

Key versions 0 and 1 are both offset commits; 2 is group metadata; the newer
consumer-group (KIP-848) record types are skipped when loading.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from strom.coordinator.groups.model import Group, OffsetEntry
from strom.wire.errors import ProtocolError
from strom.wire.formats.group_coordinator.group_metadata_key import GroupMetadataKey
from strom.wire.formats.group_coordinator.group_metadata_value import GroupMetadataValue
from strom.wire.formats.group_coordinator.offset_commit_key import OffsetCommitKey
from strom.wire.formats.group_coordinator.offset_commit_value import OffsetCommitValue

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
_SHORT = struct.Struct(">h")

KeyValue = tuple[bytes, bytes | None]


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition of an internal topic that holds `key`: Kafka's
    Utils.abs(key.hashCode()) % partitions, for a group id in __consumer_offsets
    (offsets.topic.num.partitions) and a transactional id in __transaction_state
    (transaction.state.log.num.partitions) alike."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _framed(
    version: int, body: OffsetCommitKey | OffsetCommitValue | GroupMetadataKey | GroupMetadataValue
) -> bytes:
    return _SHORT.pack(version) + body.encode(version)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _framed(OFFSET_KEY_VERSION, OffsetCommitKey(group_id, topic, partition))


def offset_record(group_id: str, topic: str, partition: int, entry: OffsetEntry) -> KeyValue:
    version = OFFSET_VALUE_VERSION if entry.expire_timestamp is None else OFFSET_VALUE_WITH_EXPIRY
    value = OffsetCommitValue(
        offset=entry.offset,
        leader_epoch=entry.leader_epoch,
        metadata=entry.metadata,
        commit_timestamp=entry.commit_timestamp,
        expire_timestamp=-1 if entry.expire_timestamp is None else entry.expire_timestamp,
    )
    return offset_key(group_id, topic, partition), _framed(version, value)


def group_key(group_id: str) -> bytes:
    return _framed(GROUP_KEY_VERSION, GroupMetadataKey(group_id))


def group_record(group: Group, now: int, assignments: dict[str, bytes] | None = None) -> KeyValue:
    """The group's metadata; `assignments` overrides the members' current ones (SyncGroup)."""
    members = [
        GroupMetadataValue.MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name),
            assignment=m.assignment if assignments is None else assignments.get(m.member_id, b""),
        )
        for m in group.members.values()
    ]
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation,
        protocol=group.protocol_name,
        leader=group.leader,
        current_state_timestamp=now,
        members=members,
    )
    return group_key(group.group_id), _framed(GROUP_VALUE_VERSION, value)


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    entry: OffsetEntry | None
    """None: a tombstone."""
    producer_id: int = -1
    """The transaction that wrote it (TxnOffsetCommit), -1 for a plain commit: a transaction's
    offsets count only once its COMMIT marker follows."""


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A transaction marker in the partition: producer `producer_id`'s transaction ended."""

    producer_id: int
    commit: bool


@dataclass(frozen=True, slots=True)
class GroupRecord:
    group_id: str
    value: GroupMetadataValue | None


LoadedRecord = OffsetRecord | GroupRecord | TxnMarker
"""What loading a `__consumer_offsets` partition yields, in log order."""


def parse_record(
    key: bytes | None, value: bytes | None, producer_id: int = -1
) -> OffsetRecord | GroupRecord | None:
    """Decode one record of the topic (`producer_id`: of its transactional batch, if any);
    None for record types this coordinator does not keep."""
    if key is None or len(key) < 2:
        raise ProtocolError("__consumer_offsets record without a key")
    version = _SHORT.unpack_from(key)[0]
    body = memoryview(key)[2:]
    if version in (0, 1):
        k = OffsetCommitKey.decode(body, version)
        return OffsetRecord(
            k.group, k.topic, k.partition, None if value is None else _offset(value), producer_id
        )
    if version == GROUP_KEY_VERSION:
        g = GroupMetadataKey.decode(body, version)
        if value is None:
            return GroupRecord(g.group, None)
        v_version = min(_SHORT.unpack_from(value)[0], GroupMetadataValue.MAX_VERSION)
        return GroupRecord(g.group, GroupMetadataValue.decode(memoryview(value)[2:], v_version))
    return None


def _offset(value: bytes) -> OffsetEntry:
    version = min(_SHORT.unpack_from(value)[0], OffsetCommitValue.MAX_VERSION)
    v = OffsetCommitValue.decode(memoryview(value)[2:], version)
    return OffsetEntry(
        v.offset,
        v.leader_epoch,
        v.metadata,
        v.commit_timestamp,
        None if v.expire_timestamp < 0 or version != 1 else v.expire_timestamp,
    )
