"""What the simulation's clients saw, and the properties judged on it.

`History` records every send, acknowledgement, read, commit and transaction outcome as it
happens (plus what the final read and the replica comparison found); `check` judges it:

| property | violation |
|---|---|
| lost | an acknowledged value missing from the final read, or at another offset than its acknowledgement named |
| duplicated | a value at two offsets (idempotence: the broker must recognise a resent batch) |
| unexpected | a value in the log that nobody sent |
| changed | an offset a reader once read holds another value (or none) in the final read: committed data rewritten or lost |
| reordered | two acknowledged batches of one producer in one partition at offsets contradicting their order |
| holes | batches in the final read that do not follow each other offset for offset |
| aborted read | a read_committed reader (live or final) saw a record of a transaction that was aborted |
| not atomic | a transaction's records partly visible to the final read_committed read |
| committed lost | a transaction whose commit was acknowledged, not wholly visible to the final read_committed read |
| offsets back | a group's committed offset read lower than a commit acknowledged before the read began |
| txn offsets | a group's final offsets from an aborted transaction, or older than the last committed one |
| replicas differ | two replicas' batches below the high watermark differ (`SimCluster` compares them) |
| invariant | a live invariant (one leader per partition epoch, Raft's) failed while running |

A value is written once (`<producer>-<n>`, or `<txn>-<partition>-<i>` in a transaction), so
where and how often it appears says everything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class FetchedRecord(Protocol):
    offset: int
    value: bytes
    producer_id: int
    transactional: bool


@dataclass
class Txn:
    name: str
    values: dict[int, list[bytes]]
    offsets: dict[int, int] = field(default_factory=dict)
    group: str = ""
    commit_sent: bool | None = None
    """None: EndTxn never sent; else the decision sent (True: commit)."""
    ended: bool | None = None
    """The decision acknowledged by the coordinator (None: not acknowledged)."""
    failed: str = ""

    @property
    def must_commit(self) -> bool:
        return self.ended is True

    @property
    def must_abort(self) -> bool:
        return self.ended is False or self.commit_sent in (None, False)


@dataclass
class Violation:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class History:
    def __init__(self, trace: Callable[[str], None]) -> None:
        self.trace = trace
        self.sent: dict[bytes, tuple[str, int]] = {}
        """value -> (producer, partition)"""
        self.acked: dict[bytes, tuple[int, int]] = {}
        """value -> (partition, offset or -1)"""
        self.ack_order: dict[tuple[str, int], list[tuple[int, list[bytes]]]] = defaultdict(list)
        self.indeterminate_values: set[bytes] = set()
        self.reads: dict[tuple[int, int], bytes] = {}
        """(partition, offset) -> value, from the live readers"""
        self.committed_reads: list[tuple[int, int, bytes]] = []
        self.txns: dict[str, Txn] = {}
        self.txn_of: dict[bytes, str] = {}
        self.commits_acked: dict[tuple[str, int], int] = {}
        self.live: list[Violation] = []
        self.final_records: dict[int, list[tuple[int, bytes]]] = {}
        self.final_committed: dict[int, list[tuple[int, bytes]]] = {}
        self.final_holes: list[str] = []
        self.final_group_offsets: dict[str, dict[int, int]] = {}
        self.replica_problems: list[str] = []
        self.notes: list[str] = []
        self.counts: dict[str, int] = defaultdict(int)
        self.on_violation: Callable[[], None] | None = None
        """Called after each violation found while running (e.g. to end the run there)."""

    # --- recording --------------------------------------------------------------------------

    def note(self, text: str) -> None:
        self.trace(text)

    def anomaly(self, text: str) -> None:
        self.trace(f"anomaly: {text}")
        self.notes.append(text)

    def violation(self, kind: str, detail: str) -> None:
        self.trace(f"VIOLATION {kind}: {detail}")
        self.live.append(Violation(kind, detail))
        if self.on_violation is not None:
            self.on_violation()

    def sending(self, producer: str, partition: int, values: list[bytes]) -> None:
        for value in values:
            self.sent[value] = (producer, partition)
        self.counts["sent"] += len(values)

    def acknowledged(
        self, producer: str, partition: int, values: list[bytes], offset: int, attempts: int
    ) -> None:
        for i, value in enumerate(values):
            self.acked[value] = (partition, offset + i if offset >= 0 else -1)
        self.ack_order[(producer, partition)].append((offset, values))
        self.counts["acknowledged"] += len(values)
        if attempts > 1:
            self.counts["retried batches"] += 1

    def indeterminate(self, producer: str, partition: int, values: list[bytes], why: str) -> None:
        self.indeterminate_values.update(values)
        self.counts["indeterminate"] += len(values)
        self.trace(f"{producer}: {len(values)} values indeterminate in partition {partition}: {why}")

    def read(
        self, reader: str, partition: int, records: Sequence[FetchedRecord], start: int,
        next_offset: int, *, committed: bool,
    ) -> None:  # fmt: skip
        for record in records:
            if committed:
                self.committed_reads.append((partition, record.offset, record.value))
                continue
            known = self.reads.setdefault((partition, record.offset), record.value)
            if known != record.value:
                self.violation(
                    "changed",
                    f"{reader}: partition {partition} offset {record.offset} read as "
                    f"{record.value!r}, earlier as {known!r}",
                )
        self.counts["read"] += len(records)

    def txn_begin(self, name: str, values: dict[int, list[bytes]]) -> None:
        self.txns[name] = Txn(name, values)
        for partition_values in values.values():
            for value in partition_values:
                self.txn_of[value] = name
                self.sent[value] = (name, -1)
        self.counts["transactions"] += 1

    def txn_written(self, name: str, partition: int, offset: int) -> None:
        pass

    def txn_offsets(self, name: str, group: str, offsets: dict[int, int]) -> None:
        txn = self.txns[name]
        txn.group, txn.offsets = group, dict(offsets)

    def txn_ending(self, name: str, commit: bool) -> None:
        self.txns[name].commit_sent = commit

    def txn_ended(self, name: str, commit: bool) -> None:
        self.txns[name].ended = commit
        self.counts["committed transactions" if commit else "aborted transactions"] += 1
        self.trace(f"{name}: {'committed' if commit else 'aborted'}")

    def txn_failed(self, name: str, why: str) -> None:
        self.txns[name].failed = why
        self.counts["failed transactions"] += 1
        self.trace(f"{name}: failed ({why})")

    def commit_sent(self, group: str, partition: int, offset: int) -> None:
        self.counts["offset commits"] += 1

    def commit_acknowledged(self, group: str, partition: int, offset: int) -> None:
        key = (group, partition)
        self.commits_acked[key] = max(offset, self.commits_acked.get(key, -1))

    def commit_mark(self, group: str) -> dict[int, int]:
        return {p: o for (g, p), o in self.commits_acked.items() if g == group}

    def commit_read(self, group: str, partition: int, offset: int, mark: dict[int, int]) -> None:
        floor = mark.get(partition, -1)
        if offset < floor:
            self.violation(
                "offsets back",
                f"group {group} partition {partition}: read {offset} after {floor} was "
                "acknowledged",
            )

    # --- judging ------------------------------------------------------------------------------

    def check(self) -> list[Violation]:
        found = list(self.live)
        found += self._check_values()
        found += self._check_order()
        found += self._check_transactions()
        found += self._check_group_offsets()
        found += [Violation("holes", h) for h in self.final_holes]
        found += [Violation("replicas differ", p) for p in self.replica_problems]
        return found

    def _check_values(self) -> list[Violation]:
        out: list[Violation] = []
        where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
        final_at: dict[tuple[int, int], bytes] = {}
        for partition, records in self.final_records.items():
            for offset, value in records:
                where[value].append((partition, offset))
                final_at[(partition, offset)] = value
        for value, places in sorted(where.items()):
            if len(places) > 1:
                out.append(Violation("duplicated", f"{value!r} at {places}"))
            if value not in self.sent:
                out.append(Violation("unexpected", f"{value!r} at {places}"))
        for value, (partition, offset) in sorted(self.acked.items()):
            places = where.get(value, [])
            if not places:
                out.append(Violation("lost", f"{value!r} acknowledged at {partition}/{offset}"))
            elif offset >= 0 and (partition, offset) not in places:
                out.append(
                    Violation("lost", f"{value!r} acknowledged at {partition}/{offset}, found at {places}")
                )
        for (partition, offset), value in sorted(self.reads.items()):
            if final_at.get((partition, offset)) != value:
                out.append(
                    Violation(
                        "changed",
                        f"partition {partition} offset {offset} was read as {value!r}, the final "
                        f"read has {final_at.get((partition, offset))!r}",
                    )
                )
        return out

    def _check_order(self) -> list[Violation]:
        out: list[Violation] = []
        for (producer, partition), batches in sorted(self.ack_order.items()):
            last = -1
            for offset, values in batches:
                if offset < 0:
                    continue
                if offset <= last:
                    out.append(
                        Violation(
                            "reordered",
                            f"{producer} in partition {partition}: {values[0]!r} at {offset} "
                            f"after a batch ending at {last}",
                        )
                    )
                last = offset + len(values) - 1
        return out

    def _check_transactions(self) -> list[Violation]:
        out: list[Violation] = []
        visible: set[bytes] = {v for records in self.final_committed.values() for _, v in records}
        for partition, offset, value in self.committed_reads:
            name = self.txn_of.get(value)
            if name is not None and self.txns[name].must_abort:
                out.append(
                    Violation("aborted read", f"a live read_committed reader saw {value!r} of "
                              f"aborted {name} at {partition}/{offset}")
                )
        for name, txn in sorted(self.txns.items()):
            values = [v for vs in txn.values.values() for v in vs]
            seen = [v for v in values if v in visible]
            if txn.must_abort and seen:
                out.append(Violation("aborted read", f"{name} ({_outcome(txn)}): {seen[0]!r} visible"))
            elif seen and len(seen) != len(values):
                missing = [v for v in values if v not in visible]
                out.append(Violation("not atomic", f"{name}: {missing[0]!r} missing, {seen[0]!r} visible"))
            elif txn.must_commit and not seen:
                out.append(Violation("committed lost", f"{name}: none of {len(values)} records visible"))
        return out

    def _check_group_offsets(self) -> list[Violation]:
        out: list[Violation] = []
        for (group, partition), acked in sorted(self.commits_acked.items()):
            final = self.final_group_offsets.get(group, {}).get(partition, -1)
            if final < acked:
                out.append(Violation("offsets back", f"group {group} partition {partition}: "
                                     f"final {final} < acknowledged {acked}"))  # fmt: skip
        by_group: dict[str, list[Txn]] = defaultdict(list)
        for txn in self.txns.values():
            if txn.group:
                by_group[txn.group].append(txn)
        for group, txns in sorted(by_group.items()):
            finals = self.final_group_offsets.get(group, {})
            for partition, offset in sorted(finals.items()):
                writers = [t for t in txns if t.offsets.get(partition) == offset]
                if writers and all(t.must_abort for t in writers):
                    out.append(Violation("txn offsets", f"group {group} partition {partition} = "
                                         f"{offset}, from aborted {writers[0].name}"))  # fmt: skip
                committed = [t for t in txns if t.must_commit and partition in t.offsets]
                if committed:
                    last = committed[-1]
                    later = txns[txns.index(last) :]
                    allowed = {t.offsets[partition] for t in later if partition in t.offsets and not t.must_abort}
                    if offset not in allowed:
                        out.append(Violation("txn offsets", f"group {group} partition {partition} "
                                             f"= {offset}, older than committed {last.name}"))  # fmt: skip
        return out

    def summary(self, violations: list[Violation]) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        if not violations:
            return f"VALID ({counts})"
        kinds: dict[str, int] = defaultdict(int)
        for v in violations:
            kinds[v.kind] += 1
        return "INVALID: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + f" ({counts})"


def _outcome(txn: Txn) -> str:
    if txn.ended is not None:
        return "committed" if txn.ended else "aborted"
    if txn.commit_sent is None:
        return f"failed before EndTxn: {txn.failed}"
    return f"EndTxn({'commit' if txn.commit_sent else 'abort'}) unanswered: {txn.failed}"
