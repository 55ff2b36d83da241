"""`OffsetStore`: the committed-offsets half of the classic group coordinator.

Kafka's OffsetMetadataManager: OffsetCommit, OffsetFetch, OffsetDelete and offset
retention, over the offsets of every group this node coordinates. Membership
(`strom.coordinator.groups.membership`) is the other half; a commit is checked
against the group's members and generation there, and a commit counts as a
heartbeat for its member. `GroupCoordinator` composes the two and decides, with
both, when a group is deleted.

Offsets are applied only once their records are written (`Outbox`): until the
outcome of the write comes back, OffsetFetch still answers the previous offsets.
Outcomes can come back in any order (the driver waits for each write's replication
in a task of its own), so a write is applied only if it comes later in the log than
the last one applied for the same offset, as Kafka's coordinator compares the
places of commit records in the log (`_sequence` orders writes as the log does).
Offsets exist only for groups present in membership's `groups`: a simple commit
creates its group there, and deleting or unloading a group forgets its offsets.

**Transactional offsets** (TxnOffsetCommit, KIP-98/KIP-447) are written as their producer's
transactional batch and held *pending* per producer: invisible to OffsetFetch (which with
`require_stable` answers UNSTABLE_OFFSET_COMMIT for them), until the transaction's marker
reaches the group's partition (`complete_transaction`). A COMMIT makes them committed
offsets, unless a commit written after them already replaced them (Kafka compares their
places in the log; `_sequence` orders writes as the log does); an ABORT drops them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
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
    TxnCommitRequest,
)
from strom.coordinator.groups.membership import GroupMembership
from strom.coordinator.groups.model import CONSUMER_PROTOCOL_TYPE, Group, GroupState, OffsetEntry
from strom.coordinator.groups.outbox import Outbox
from strom.coordinator.groups.records import LoadedRecord, OffsetRecord, TxnMarker
from strom.wire.errors import ErrorCode

Offsets = dict[str, dict[int, OffsetEntry]]
"""One group's committed offsets: topic -> partition -> entry."""


@dataclass(frozen=True, slots=True)
class _Pending:
    """A transactional offset waiting for its transaction's marker."""

    entry: OffsetEntry
    sequence: int


class OffsetStore:
    def __init__(self, config: GroupConfig, membership: GroupMembership, outbox: Outbox) -> None:
        self.config = config
        self.membership = membership
        self.outbox = outbox
        self._committed: dict[str, Offsets] = {}
        self._written_at: dict[str, dict[PartitionKey, int]] = {}
        """group -> offset -> the `_sequence` of the last write applied to it: its commit,
        or its tombstone while older writes of the group may still come back."""
        self._pending: dict[int, dict[str, dict[PartitionKey, _Pending]]] = {}
        """producer id -> group -> its transaction's offsets not yet committed or aborted."""
        self._sequence = itertools.count()

    # --- what the coordinator asks of it -----------------------------------------------------

    def replay(self, loaded: Iterable[LoadedRecord]) -> set[str]:
        """Rebuild the offsets of one partition's groups from its records, in log order (last
        one per key wins, tombstones delete, a transaction's offsets wait for its marker);
        the groups that had offset records."""
        touched: set[str] = set()
        for record in loaded:
            if isinstance(record, TxnMarker):
                self.complete_transaction(
                    record.producer_id, record.commit, touched.__contains__, replaying=True
                )
                continue
            if not isinstance(record, OffsetRecord):
                continue
            touched.add(record.group_id)
            key = (record.topic, record.partition)
            sequence = next(self._sequence)
            if record.producer_id >= 0:
                held = self._pending.setdefault(record.producer_id, {})
                offsets = held.setdefault(record.group_id, {})
                if record.entry is None:
                    offsets.pop(key, None)
                else:
                    offsets[key] = _Pending(record.entry, sequence)
            elif record.entry is None:
                self._written_at.get(record.group_id, {}).pop(key, None)
                parts = self._committed.get(record.group_id, {}).get(record.topic)
                if parts is not None:
                    parts.pop(record.partition, None)
            else:
                self._set_committed(record.group_id, key, record.entry, sequence)
        for group_id in touched:  # drop what deletions emptied
            committed = self._committed.get(group_id)
            if committed is not None:
                for topic in [t for t, parts in committed.items() if not parts]:
                    del committed[topic]
                if not committed:
                    del self._committed[group_id]
        return touched

    def forget(self, group_id: str) -> None:
        self._written_at.pop(group_id, None)
        self._committed.pop(group_id, None)
        for producer_id in list(self._pending):
            groups = self._pending[producer_id]
            groups.pop(group_id, None)
            if not groups:
                del self._pending[producer_id]

    def has_pending(self, group_id: str) -> bool:
        """Whether a transaction's offsets for the group await their marker."""
        return any(group_id in groups for groups in self._pending.values())

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
        written = partial(self._offsets_deleted, group, doomed, {}, None, next(self._sequence))
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
        sequence = next(self._sequence)
        written = partial(self._commit_written, group, writes, results, keys, waiter, sequence)
        committing = tuple((p.topic, p.partition) for p, _ in writes)
        self.outbox.write(group.group_id, batch, written, committing)
        return None

    def _set_committed(
        self, group_id: str, key: PartitionKey, entry: OffsetEntry, sequence: int
    ) -> None:
        offsets = self._committed.setdefault(group_id, {})
        offsets.setdefault(key[0], {})[key[1]] = entry
        self._written_at.setdefault(group_id, {})[key] = sequence

    def _superseded(self, group_id: str, key: PartitionKey, sequence: int) -> bool:
        """Whether a write later in the log than `sequence` was already applied to the offset."""
        return self._written_at.get(group_id, {}).get(key, -1) > sequence

    def _commit_written(
        self,
        group: Group,
        writes: list[tuple[CommitPartition, OffsetEntry]],
        results: dict[PartitionKey, ErrorCode],
        keys: list[PartitionKey],
        waiter: int,
        sequence: int,
        now: int,
        error: ErrorCode,
    ) -> None:
        current = self.membership.groups.get(group.group_id) is group
        for part, entry in writes:
            key = (part.topic, part.partition)
            if not error and current and not self._superseded(group.group_id, key, sequence):
                self._set_committed(group.group_id, key, entry, sequence)
            results[key] = error
        if error:
            self._forget_if_untouched(group)
        self.outbox.reply(waiter, CommitResult({key: results[key] for key in keys}))

    def _forget_if_untouched(self, group: Group) -> None:
        """Drop a group a simple commit created if nothing was written for it after all."""
        untouched = group.generation == 0 and group.protocol_type is None and not group.members
        if (
            untouched
            and not self.has_offsets(group.group_id)
            and not self.has_pending(group.group_id)
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

    def unstable(self, group_id: str) -> set[PartitionKey]:
        """Partitions with a transaction's offsets awaiting their marker (OffsetFetch with
        require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return {key for groups in self._pending.values() for key in groups.get(group_id, {})}

    # --- TxnOffsetCommit and transaction markers ---------------------------------------------

    def txn_commit(self, now: int, req: TxnCommitRequest, waiter: int) -> CommitResult | None:
        """TxnOffsetCommit: the result now, or None until the transaction's offsets are
        written (pending until its marker). Checked as Kafka checks a transactional commit:
        a missing group is created only for generation -1 (else ILLEGAL_GENERATION); with a
        member or generation they must be current (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
        ILLEGAL_GENERATION); a rebalance in progress does not refuse it."""
        keys = [(p.topic, p.partition) for p in req.partitions]
        error, group = self._validate_txn_commit(now, req)
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
            writes.append((part, OffsetEntry(part.offset, part.leader_epoch, metadata, now)))
        if not writes:
            self._forget_if_untouched(group)
            return CommitResult({key: results[key] for key in keys})
        batch = [records.offset_record(group.group_id, p.topic, p.partition, e) for p, e in writes]
        sequence = next(self._sequence)

        def written(at: int, err: ErrorCode) -> None:
            if not err and self.membership.groups.get(group.group_id) is group:
                pending = self._pending.setdefault(req.producer_id, {})
                offsets = pending.setdefault(group.group_id, {})
                for part, entry in writes:
                    offsets[(part.topic, part.partition)] = _Pending(entry, sequence)
            for part, _ in writes:
                results[(part.topic, part.partition)] = err
            if err:
                self._forget_if_untouched(group)
            self.outbox.reply(waiter, CommitResult({key: results[key] for key in keys}))

        self.outbox.write(
            group.group_id, batch, written, producer=(req.producer_id, req.producer_epoch)
        )
        return None

    def _validate_txn_commit(
        self, now: int, req: TxnCommitRequest
    ) -> tuple[ErrorCode, Group | None]:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID, None
        groups = self.membership.groups
        group = groups.get(req.group_id)
        if group is None:
            if req.generation >= 0:
                return ErrorCode.ILLEGAL_GENERATION, None
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
        return ErrorCode.NONE, group

    def complete_transaction(
        self,
        producer_id: int,
        commit: bool,
        in_partition: Callable[[str], bool],
        *,
        replaying: bool = False,
    ) -> int:
        """A marker of `producer_id` is in the partition whose groups `in_partition` selects:
        its pending offsets there become committed (COMMIT) or are dropped (ABORT). Returns
        how many offsets it committed. `replaying`: loading, before the groups exist."""
        groups = self._pending.get(producer_id)
        if not groups:
            return 0
        committed = 0
        for group_id in [g for g in groups if in_partition(g)]:
            pending = groups.pop(group_id)
            if not commit or (not replaying and group_id not in self.membership.groups):
                continue
            for key, held in pending.items():
                if not self._superseded(group_id, key, held.sequence):
                    self._set_committed(group_id, key, held.entry, held.sequence)
                    committed += 1
        if not groups:
            del self._pending[producer_id]
        return committed

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

        written = partial(
            self._offsets_deleted, group, doomed, results, waiter, next(self._sequence)
        )
        self.outbox.write(group.group_id, tombstones(group.group_id, doomed), written)
        return None

    def _offsets_deleted(
        self,
        group: Group,
        doomed: list[PartitionKey],
        results: dict[PartitionKey, ErrorCode],
        waiter: int | None,
        sequence: int,
        now: int,
        error: ErrorCode,
    ) -> None:
        if error:
            self.outbox.reply(waiter, OffsetDeleteResult(error))
            return
        offsets = self._committed.get(group.group_id, {})
        older_may_come = self.outbox.has_writes_in_flight(group.group_id)
        written_at = self._written_at.setdefault(group.group_id, {})
        for topic, partition in doomed:
            key = (topic, partition)
            if self._superseded(group.group_id, key, sequence):
                continue  # a commit written after the tombstone is already applied
            if older_may_come:
                written_at[key] = sequence  # keeps a commit written before it from returning
            else:
                written_at.pop(key, None)
            parts = offsets.get(topic, {})
            parts.pop(partition, None)
            if not parts:
                offsets.pop(topic, None)
        if not offsets:
            self._committed.pop(group.group_id, None)
        if not written_at:
            del self._written_at[group.group_id]
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
