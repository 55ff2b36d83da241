"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and retention.

A commit is validated against the group as Kafka does (simple commits with
generation -1 only while the group is empty; otherwise member, instance and
generation must match), written to the log through the sink, and only then
applied and acknowledged.
"""

from __future__ import annotations

from strom.coordinator.groups import records
from strom.coordinator.groups.api import CommitPartition, CommitRequest, KeyValue
from strom.coordinator.groups.base import CoordinatorBase
from strom.coordinator.groups.model import Group, GroupState, OffsetEntry
from strom.wire.errors import ErrorCode

S = GroupState
PartitionKey = tuple[str, int]


def storage_error_for_commit(error: ErrorCode) -> ErrorCode:
    """How a failed append is reported to a committer (Kafka's mapping)."""
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


class OffsetsMixin(CoordinatorBase):
    def commit(self, now: int, req: CommitRequest) -> dict[PartitionKey, ErrorCode]:
        keys = [(p.topic, p.partition) for p in req.partitions]
        error, group = self._validate_commit(now, req)
        if error:
            return dict.fromkeys(keys, error)
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
        if writes:
            batch = [
                records.offset_record(group.group_id, p.topic, p.partition, e) for p, e in writes
            ]
            written = self.sink(group.group_id, batch)
            for part, entry in writes:
                key = (part.topic, part.partition)
                if written:
                    results[key] = storage_error_for_commit(written)
                else:
                    group.offsets.setdefault(part.topic, {})[part.partition] = entry
                    results[key] = ErrorCode.NONE
        untouched = group.generation == 0 and group.protocol_type is None and not group.members
        if untouched and not group.has_offsets() and group.group_id in self.groups:
            del self.groups[group.group_id]  # a simple commit that wrote nothing
        return {key: results[key] for key in keys}

    def _validate_commit(self, now: int, req: CommitRequest) -> tuple[ErrorCode, Group | None]:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID, None
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation >= 0:
                missing = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if req.group_must_exist
                    else ErrorCode.ILLEGAL_GENERATION
                )
                return missing, None
            group = self.groups[req.group_id] = Group(req.group_id, state_timestamp=now)
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if req.generation < 0 and group.state is S.EMPTY:
            return ErrorCode.NONE, group
        if req.generation >= 0 or req.member_id or req.group_instance_id is not None:
            error = group.validate_member(req.member_id, req.group_instance_id)
            if error:
                return error, None
            if req.generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION, None
        elif group.state is not S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if group.state is S.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, None
        member = group.members.get(req.member_id)
        if member is not None:  # a commit is as good as a heartbeat
            member.deadline = max(member.deadline, now + member.session_timeout_ms)
            self._schedule(group)
        return ErrorCode.NONE, group

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, OffsetEntry | None]]]]:
        """Committed offsets of the requested partitions (None: not committed), or all of them."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and group.state is not S.DEAD else {}
        if topics is None:
            return [
                (topic, sorted(parts.items())) for topic, parts in sorted(offsets.items()) if parts
            ]
        return [
            (topic, [(p, offsets.get(topic, {}).get(p)) for p in partitions])
            for topic, partitions in topics
        ]

    def delete_offsets(
        self, group_id: str, partitions: list[PartitionKey]
    ) -> tuple[ErrorCode, dict[PartitionKey, ErrorCode]]:
        group = self.groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        if group is None or group.state is S.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group.state is not S.EMPTY and group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, {}
        results: dict[PartitionKey, ErrorCode] = {}
        doomed: list[PartitionKey] = []
        for topic, partition in partitions:
            if group.is_subscribed(topic):
                results[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[(topic, partition)] = ErrorCode.NONE
                if partition in group.offsets.get(topic, {}):
                    doomed.append((topic, partition))
        error = self._remove_offsets(group, doomed)
        if error:
            return error, {}
        return ErrorCode.NONE, results

    def _remove_offsets(
        self, group: Group, doomed: list[PartitionKey], extra: list[KeyValue] | None = None
    ) -> ErrorCode:
        batch: list[KeyValue] = [
            (records.offset_key(group.group_id, t, p), None) for t, p in doomed
        ]
        batch += extra or []
        if not batch:
            return ErrorCode.NONE
        error = self.sink(group.group_id, batch)
        if error:
            return error
        for topic, partition in doomed:
            parts = group.offsets.get(topic, {})
            parts.pop(partition, None)
            if not parts:
                group.offsets.pop(topic, None)
        return ErrorCode.NONE

    def expire_offsets(self, now: int) -> int:
        """offsets.retention.minutes; an empty group left without offsets is deleted too."""
        removed = 0
        for group in list(self.groups.values()):
            doomed = [
                (topic, partition)
                for topic, parts in group.offsets.items()
                for partition, entry in parts.items()
                if self._expired(group, topic, entry, now)
            ]
            if doomed and not self._remove_offsets(group, doomed):
                removed += len(doomed)
            idle = group.state is S.EMPTY and not group.has_offsets() and not group.pending
            if idle and not self.sink(group.group_id, [(records.group_key(group.group_id), None)]):
                self._transition(group, S.DEAD, now)
                del self.groups[group.group_id]
        return removed

    def _expired(self, group: Group, topic: str, entry: OffsetEntry, now: int) -> bool:
        if entry.expire_timestamp is not None:
            return now >= entry.expire_timestamp
        retention = self.config.offsets_retention_ms
        if group.protocol_type is None:
            return now - entry.commit_timestamp >= retention
        if group.state is S.EMPTY:
            base = group.state_timestamp if group.state_timestamp >= 0 else entry.commit_timestamp
            return now - base >= retention
        if group.state is S.STABLE and group.subscribed_topics is not None:
            return (
                topic not in group.subscribed_topics and now - entry.commit_timestamp >= retention
            )
        return False
