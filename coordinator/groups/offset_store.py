"""`OffsetStore`: the committed-offsets half of the classic group coordinator.

Kafka's OffsetMetadataManager: OffsetCommit, OffsetFetch, OffsetDelete and offset
retention, over the offsets of every group this node coordinates. Membership
(`strom.coordinator.groups.membership`) is the other half; a commit is checked
against the group's members and generation there, and a commit counts as a
heartbeat for its member. `GroupCoordinator` composes the two and decides, with
both, when a group is deleted.

Offsets are applied only once their records are written (`Outbox`): until the
outcome of the write comes back, OffsetFetch still answers the previous offsets.
Offsets exist only for groups present in membership's `groups`: a simple commit
creates its group there, and deleting or unloading a group forgets its offsets.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from strom.coordinator.groups import records
from strom.coordinator.groups.api import (
    CommitPartition,
    CommitRequest,
    CommitResult,
    GroupConfig,
    KeyValue,
    OffsetDeleteResult,
    PartitionKey,
)
from strom.coordinator.groups.membership import GroupMembership
from strom.coordinator.groups.model import CONSUMER_PROTOCOL_TYPE, Group, GroupState, OffsetEntry
from strom.coordinator.groups.outbox import Outbox
from strom.wire.errors import ErrorCode

Offsets = dict[str, dict[int, OffsetEntry]]
"""One group's committed offsets: topic -> partition -> entry."""


class OffsetStore:
    def __init__(self, config: GroupConfig, membership: GroupMembership, outbox: Outbox) -> None:
        self.config = config
        self.membership = membership
        self.outbox = outbox
        self._committed: dict[str, Offsets] = {}

    # --- what the coordinator asks of it -----------------------------------------------------

    def load(self, group_id: str, offsets: Offsets) -> None:
        if offsets:
            self._committed[group_id] = offsets

    def forget(self, group_id: str) -> None:
        self._committed.pop(group_id, None)

    def has_offsets(self, group_id: str) -> bool:
        return any(self._committed.get(group_id, {}).values())

    def partitions(self, group_id: str) -> list[PartitionKey]:
        """Every (topic, partition) the group has an offset for."""
        return [(t, p) for t, parts in self._committed.get(group_id, {}).items() for p in parts]

    def count(self, group_id: str) -> int:
        return sum(len(parts) for parts in self._committed.get(group_id, {}).values())

    def expired(self, group: Group, now: int) -> list[PartitionKey]:
        """The group's offsets that offsets.retention.minutes (or their own expiry) lets go."""
        return [
            (topic, partition)
            for topic, parts in self._committed.get(group.group_id, {}).items()
            for partition, entry in parts.items()
            if self._expired(group, topic, entry, now)
        ]

    def delete(self, group: Group, doomed: list[PartitionKey]) -> None:
        """Tombstone offsets nobody waits for (retention)."""
        written = partial(self._offsets_deleted, group, doomed, {}, None)
        self.outbox.write(group.group_id, tombstones(group.group_id, doomed), written)

    # --- OffsetCommit ------------------------------------------------------------------------

    def commit(self, now: int, req: CommitRequest, waiter: int) -> CommitResult | None:
        """The result now (nothing to write), or None until the offsets are written.

        A commit is validated against the group as Kafka does (simple commits with
        generation -1 only while the group is empty; otherwise member, instance and
        generation must match); its offsets are applied and acknowledged only once
        they are in the log.
        """
        keys = [(p.topic, p.partition) for p in req.partitions]
        error, group = self._validate_commit(now, req)
        if error:
            return CommitResult(dict.fromkeys(keys, error))
        assert group is not None
        results: dict[PartitionKey, ErrorCode] = {}
        writes: list[tuple[CommitPartition, OffsetEntry]] = []
        for part in req.partitions:
            metadata = part.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[(part.topic, part.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            expire = now + req.retention_ms if req.retention_ms >= 0 else None
            entry = OffsetEntry(part.offset, part.leader_epoch, metadata, now, expire)
            writes.append((part, entry))
        if not writes:
            self._forget_if_untouched(group)  # a simple commit that wrote nothing
            return CommitResult({key: results[key] for key in keys})

        batch = [records.offset_record(group.group_id, p.topic, p.partition, e) for p, e in writes]
        written = partial(self._commit_written, group, writes, results, keys, waiter)
        committing = tuple((p.topic, p.partition) for p, _ in writes)
        self.outbox.write(group.group_id, batch, written, committing)
        return None

    def _commit_written(
        self,
        group: Group,
        writes: list[tuple[CommitPartition, OffsetEntry]],
        results: dict[PartitionKey, ErrorCode],
        keys: list[PartitionKey],
        waiter: int,
        now: int,
        error: ErrorCode,
    ) -> None:
        current = self.membership.groups.get(group.group_id) is group
        for part, entry in writes:
            if not error and current:
                offsets = self._committed.setdefault(group.group_id, {})
                offsets.setdefault(part.topic, {})[part.partition] = entry
            results[(part.topic, part.partition)] = error
        if error:
            self._forget_if_untouched(group)
        self.outbox.reply(waiter, CommitResult({key: results[key] for key in keys}))

    def _forget_if_untouched(self, group: Group) -> None:
        """Drop a group a simple commit created if nothing was written for it after all."""
        untouched = group.generation == 0 and group.protocol_type is None and not group.members
        if (
            untouched
            and not self.has_offsets(group.group_id)
            and self.membership.groups.get(group.group_id) is group
            and not self.outbox.has_writes_in_flight(group.group_id)
        ):
            del self.membership.groups[group.group_id]
            self.forget(group.group_id)

    def _validate_commit(self, now: int, req: CommitRequest) -> tuple[ErrorCode, Group | None]:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID, None
        groups = self.membership.groups
        group = groups.get(req.group_id)
        if group is None:
            if req.generation >= 0:
                missing = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if req.group_must_exist
                    else ErrorCode.ILLEGAL_GENERATION
                )
                return missing, None
            group = groups[req.group_id] = Group(req.group_id, state_timestamp=now)
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if req.generation < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE, group
        if req.generation >= 0 or req.member_id or req.group_instance_id is not None:
            error = group.validate_member(req.member_id, req.group_instance_id)
            if error:
                return error, None
            if req.generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION, None
        elif group.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, None
        member = group.members.get(req.member_id)
        if member is not None:  # a commit is as good as a heartbeat
            member.deadline = max(member.deadline, now + member.session_timeout_ms)
            self.membership.schedule(group)
        return ErrorCode.NONE, group

    # --- OffsetFetch, OffsetDelete -----------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, OffsetEntry | None]]]]:
        """Committed offsets of the requested partitions (None: not committed), or all of them."""
        group = self.membership.groups.get(group_id)
        live = group is not None and group.state is not GroupState.DEAD
        offsets = self._committed.get(group_id, {}) if live else {}
        if topics is None:
            return [
                (topic, sorted(parts.items())) for topic, parts in sorted(offsets.items()) if parts
            ]
        return [
            (topic, [(p, offsets.get(topic, {}).get(p)) for p in partitions])
            for topic, partitions in topics
        ]

    def delete_offsets(
        self, now: int, group_id: str, partitions: list[PartitionKey], waiter: int
    ) -> OffsetDeleteResult | None:
        """The result now, or None until the tombstones are written."""
        group = self.membership.groups.get(group_id)
        if not group_id:
            return OffsetDeleteResult(ErrorCode.INVALID_GROUP_ID)
        if group is None or group.state is GroupState.DEAD:
            return OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND)
        if group.state is not GroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP)
        offsets = self._committed.get(group_id, {})
        results: dict[PartitionKey, ErrorCode] = {}
        doomed: list[PartitionKey] = []
        for topic, partition in partitions:
            if group.is_subscribed(topic):
                results[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[(topic, partition)] = ErrorCode.NONE
                if partition in offsets.get(topic, {}):
                    doomed.append((topic, partition))
        if not doomed:
            return OffsetDeleteResult(ErrorCode.NONE, results)

        written = partial(self._offsets_deleted, group, doomed, results, waiter)
        self.outbox.write(group.group_id, tombstones(group.group_id, doomed), written)
        return None

    def _offsets_deleted(
        self,
        group: Group,
        doomed: list[PartitionKey],
        results: dict[PartitionKey, ErrorCode],
        waiter: int | None,
        now: int,
        error: ErrorCode,
    ) -> None:
        if error:
            self.outbox.reply(waiter, OffsetDeleteResult(error))
            return
        offsets = self._committed.get(group.group_id, {})
        for topic, partition in doomed:
            parts = offsets.get(topic, {})
            parts.pop(partition, None)
            if not parts:
                offsets.pop(topic, None)
        if not offsets:
            self._committed.pop(group.group_id, None)
        self.outbox.reply(waiter, OffsetDeleteResult(ErrorCode.NONE, results))

    # --- retention ---------------------------------------------------------------------------

    def _expired(self, group: Group, topic: str, entry: OffsetEntry, now: int) -> bool:
        if entry.expire_timestamp is not None:
            return now >= entry.expire_timestamp
        retention = self.config.offsets_retention_ms
        if group.protocol_type is None:
            return now - entry.commit_timestamp >= retention
        if group.state is GroupState.EMPTY:
            base = group.state_timestamp if group.state_timestamp >= 0 else entry.commit_timestamp
            return now - base >= retention
        if group.state is GroupState.STABLE and group.subscribed_topics is not None:
            return (
                topic not in group.subscribed_topics and now - entry.commit_timestamp >= retention
            )
        return False

    def committing(self, group_id: str) -> Iterator[PartitionKey]:
        """Partitions whose commits are in flight for the group."""
        for p in self.outbox.in_flight():
            if p.write.group_id == group_id:
                yield from p.offsets


def tombstones(group_id: str, doomed: list[PartitionKey]) -> list[KeyValue]:
    return [(records.offset_key(group_id, t, p), None) for t, p in doomed]
