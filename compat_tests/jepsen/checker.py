"""The queue checker: what a history of sends and reads proves about the log (pure, no I/O).

Modelled on the safety properties Jepsen's Kafka and Redpanda queue analyses look for, written
for this repo's history shape: every value is unique, so a read names the send it came from.

- lost: a value acknowledged to its producer (or once seen by a consumer) that the final read
  of the whole log does not contain. An acknowledgement under acks=all with
  min.insync.replicas=2 is a promise; a read is of committed data (below the high watermark).
- duplicated: one value at more than one (partition, offset): the idempotent producer's retry
  was appended twice, or a failover copied it.
- reordered: two values of one producer and partition, both acknowledged, whose offsets are the
  other way round from the order they were sent in (the idempotent producer keeps send order).
- offset holes: offsets the final read skipped in [log start, end offset): nothing here
  compacts, deletes or writes transaction markers, so a partition's offsets are contiguous.
- inconsistent offsets: one (partition, offset) read with two values, or an acknowledgement
  naming an offset at which another value was read (two logs disagreeing about history).
- unexpected: a value nobody sent (garbage).
- replica divergence: two replicas of a partition holding different batches below its high
  watermark (`replicas.py` compares every node's log, batch by batch, at the end).
- live consumer skips and rewinds: the consumer that reads during the run starts at offset 0
  and receives each partition in order; an offset more than one past the last it got (records
  it never saw, Jepsen's "poll skip") or at or before it (a rewind: its position was reset, as
  after an out-of-range fetch once a log was truncated below what it had read) is a violation.

Counted, not violations: values that failed or whose fate is unknown (timed out) yet are in the
log ("unacknowledged but present": allowed, the write happened), and consumer progress.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["pending", "acked", "failed", "indeterminate"]
Phase = Literal["live", "final"]


@dataclass
class Send:
    """One value a producer handed to its client, and what became of it."""

    value: str
    producer: int
    partition: int
    seq: int
    """The producer's send index: its values were produced to the client in this order."""
    outcome: Outcome = "pending"
    offset: int | None = None
    """The offset the acknowledgement named (acked only)."""
    error: str = ""
    sent_at: float = 0.0
    """Seconds since the load began, when it was handed to the client."""
    acked_at: float | None = None
    """Seconds since the load began, when its acknowledgement arrived."""


@dataclass(frozen=True)
class Read:
    """One record a consumer received."""

    partition: int
    offset: int
    value: str
    phase: Phase = "final"
    at: float = 0.0
    """Seconds since the load began, when the consumer received it."""


@dataclass
class History:
    sends: list[Send]
    reads: list[Read]
    partitions: int
    end_offsets: dict[int, int] = field(default_factory=dict)
    """Each partition's high watermark when the final read began (what it had to reach)."""
    final_complete: bool = True
    """The final read reached every end offset before its deadline."""
    live_errors: dict[str, int] = field(default_factory=dict)
    """Errors the live consumer received instead of records, by name ("p<partition> NAME")."""
    replicas_divergent: list[str] = field(default_factory=list)
    """Replicas holding different batches below the high watermark (`replicas.compare`)."""
    replicas_behind: list[str] = field(default_factory=list)
    replicas_compared: dict[int, int] = field(default_factory=dict)
    """Partition -> batches compared across the replicas (empty: not compared)."""
    events: dict[str, int] = field(default_factory=dict)
    """What the faults made the cluster do (`workload.EventTally`): fencings, ISR shrinks..."""
    duplicate_batches: list[str] = field(default_factory=list)
    """The batch headers of the first duplicated values' copies (who wrote each)."""


@dataclass
class Report:
    sent: int = 0
    acked: int = 0
    failed: int = 0
    indeterminate: int = 0
    pending: int = 0
    read_final: int = 0
    read_live: int = 0
    lost: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    """The lost values a consumer had read before (acknowledged or not): committed, then gone."""
    duplicated: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    reordered: list[tuple[int, int, str, str]] = field(default_factory=list)
    """(producer, partition, value sent first, value sent later but at a lower offset)."""
    holes: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    """Partition -> missing [start, end) offset ranges."""
    inconsistent: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    ack_mismatch: list[tuple[str, int, int, int]] = field(default_factory=list)
    """(value, partition, acknowledged offset, offset it was read at)."""
    unexpected: list[str] = field(default_factory=list)
    poll_skips: list[tuple[int, int, int]] = field(default_factory=list)
    """(partition, last offset the live consumer had, the next one it got) for jumps forward."""
    poll_rewinds: list[tuple[int, int, int]] = field(default_factory=list)
    """(partition, last offset, the next one it got) where the next was not after the last."""
    unacked_present: int = 0
    final_incomplete: bool = False
    live_progress: dict[int, int] = field(default_factory=dict)
    """Partition -> records the live consumer read there (distinct offsets)."""
    end_offsets: dict[int, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    """Producer error name -> how many values ended with it."""
    last_send: float = 0.0
    ack_gap: tuple[float, float] = (0.0, 0.0)
    """Liveness, not safety: the longest stretch (from, to) of the load without a new
    acknowledgement, counting the load's end as one."""
    read_gap: tuple[float, float] = (0.0, 0.0)
    """The same for the live consumer's reads."""
    live_behind: dict[int, tuple[int, float, int, float]] = field(default_factory=dict)
    """Liveness: partition -> (last offset the live consumer read there or -1, when (t+s),
    acknowledged values at later offsets, when the last of them was acknowledged). The live
    consumer stops only after the producers have flushed, so it should have read every
    acknowledged value; a partition listed here is one where it stopped receiving."""
    live_errors: dict[str, int] = field(default_factory=dict)
    replicas_divergent: list[str] = field(default_factory=list)
    replicas_behind: list[str] = field(default_factory=list)
    replicas_compared: dict[int, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    duplicate_batches: list[str] = field(default_factory=list)

    @property
    def violations(self) -> dict[str, int]:
        """Each violated property with its count (empty: the history is valid)."""
        counts = {
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "reordered": len(self.reordered),
            "offset holes": sum(
                end - start for ranges in self.holes.values() for start, end in ranges
            ),
            "inconsistent offsets": len(self.inconsistent) + len(self.ack_mismatch),
            "unexpected values": len(self.unexpected),
            "live consumer skips": len(self.poll_skips),
            "live consumer rewinds": len(self.poll_rewinds),
            "final read incomplete": int(self.final_incomplete),
            "replica divergence": len(self.replicas_divergent),
        }
        return {name: n for name, n in counts.items() if n}

    @property
    def ok(self) -> bool:
        return not self.violations


def check(history: History) -> Report:
    report = Report(end_offsets=dict(history.end_offsets))
    sends = {s.value: s for s in history.sends}
    report.sent = len(history.sends)
    for s in history.sends:
        if s.outcome == "acked":
            report.acked += 1
        elif s.outcome == "failed":
            report.failed += 1
        elif s.outcome == "indeterminate":
            report.indeterminate += 1
        else:
            report.pending += 1
        if s.error:
            report.errors[s.error] = report.errors.get(s.error, 0) + 1
    report.final_incomplete = not history.final_complete

    # Every (partition, offset) -> values read there; every value -> where it was read.
    at: dict[tuple[int, int], set[str]] = defaultdict(set)
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)
    final_values: set[str] = set()
    live_offsets: dict[int, set[int]] = defaultdict(set)
    for r in history.reads:
        at[(r.partition, r.offset)].add(r.value)
        where[r.value].add((r.partition, r.offset))
        if r.phase == "final":
            report.read_final += 1
            final_values.add(r.value)
        else:
            report.read_live += 1
            live_offsets[r.partition].add(r.offset)
    report.live_progress = {p: len(o) for p, o in sorted(live_offsets.items())}

    report.inconsistent = {k: sorted(v) for k, v in sorted(at.items()) if len(v) > 1}
    report.duplicated = {v: sorted(w) for v, w in sorted(where.items()) if len(w) > 1}
    report.unexpected = sorted(v for v in where if v not in sends)

    for s in history.sends:
        seen = where.get(s.value, set())
        if s.value not in final_values and (s.outcome == "acked" or seen):
            report.lost.append(s.value)
            if seen:
                report.vanished.append(s.value)
        if s.outcome != "acked" and seen:
            report.unacked_present += 1
        if (
            s.outcome == "acked"
            and s.offset is not None
            and seen
            and (s.partition, s.offset) not in seen
        ):
            _, offset = min(seen)
            report.ack_mismatch.append((s.value, s.partition, s.offset, offset))

    last: dict[int, int] = {}
    for r in history.reads:
        if r.phase != "live":
            continue
        before = last.get(r.partition, -1)
        if r.offset > before + 1:
            report.poll_skips.append((r.partition, before, r.offset))
        elif r.offset <= before:
            report.poll_rewinds.append((r.partition, before, r.offset))
        last[r.partition] = r.offset

    report.last_send = max((s.sent_at for s in history.sends), default=0.0)
    report.ack_gap = _longest_gap(
        [s.acked_at for s in history.sends if s.acked_at is not None], report.last_send
    )
    report.read_gap = _longest_gap(
        [r.at for r in history.reads if r.phase == "live"], report.last_send
    )

    report.live_behind = _live_behind(history)
    report.live_errors = dict(history.live_errors)
    report.replicas_divergent = list(history.replicas_divergent)
    report.replicas_behind = list(history.replicas_behind)
    report.replicas_compared = dict(history.replicas_compared)
    report.events = dict(history.events)
    report.duplicate_batches = list(history.duplicate_batches)
    report.holes = _holes(history)
    report.reordered = _reordered(history, sends)
    return report


LIVE_STALL_S = 10.0
"""A partition's acknowledgements this long after the live consumer's last read there (and
past its offset) mean the consumer stopped receiving, not that it lagged one poll behind."""


def _live_behind(history: History) -> dict[int, tuple[int, float, int, float]]:
    """Partitions whose acknowledged values go past the live consumer's last read there, the
    last of them acknowledged over LIVE_STALL_S after that read."""
    last: dict[int, tuple[int, float]] = {}
    for r in history.reads:
        if r.phase == "live" and r.offset > last.get(r.partition, (-1, 0.0))[0]:
            last[r.partition] = (r.offset, r.at)
    behind: dict[int, tuple[int, float, int, float]] = {}
    for partition in range(history.partitions):
        offset, at = last.get(partition, (-1, 0.0))
        later = [
            s for s in history.sends
            if s.partition == partition and s.outcome == "acked"
            and s.offset is not None and s.offset > offset
        ]  # fmt: skip
        acked_at = max((s.acked_at or 0.0 for s in later), default=0.0)
        if later and acked_at - at > LIVE_STALL_S:
            behind[partition] = (offset, at, len(later), acked_at)
    return behind


def _longest_gap(times: list[float], end: float) -> tuple[float, float]:
    """The longest interval between consecutive times in [0, end] (0 and end included)."""
    points = sorted([0.0, *(t for t in times if t <= end), end])
    return max(itertools.pairwise(points), key=lambda ab: ab[1] - ab[0], default=(0.0, 0.0))


def _holes(history: History) -> dict[int, list[tuple[int, int]]]:
    offsets: dict[int, set[int]] = defaultdict(set)
    for r in history.reads:
        if r.phase == "final":
            offsets[r.partition].add(r.offset)
    holes: dict[int, list[tuple[int, int]]] = {}
    for partition in range(history.partitions):
        seen = offsets.get(partition, set())
        end = max(history.end_offsets.get(partition, 0), max(seen, default=-1) + 1)
        missing = _ranges(o for o in range(end) if o not in seen)
        if missing:
            holes[partition] = missing
    return holes


def _ranges(offsets: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for o in offsets:
        if out and out[-1][1] == o:
            out[-1] = (out[-1][0], o + 1)
        else:
            out.append((o, o + 1))
    return out


def _reordered(history: History, sends: dict[str, Send]) -> list[tuple[int, int, str, str]]:
    """Acknowledged values of one producer and partition, in final-read offset order, must
    have increasing send indexes: each value read after one sent later is out of order."""
    first_offset: dict[str, tuple[int, int]] = {}
    for r in history.reads:
        if r.phase == "final" and r.value in sends:
            key = (r.partition, r.offset)
            first_offset[r.value] = min(first_offset.get(r.value, key), key)
    streams: dict[tuple[int, int], list[tuple[int, Send]]] = defaultdict(list)
    for value, (partition, offset) in first_offset.items():
        s = sends[value]
        if s.outcome == "acked":
            streams[(s.producer, partition)].append((offset, s))
    out: list[tuple[int, int, str, str]] = []
    for (producer, partition), stream in sorted(streams.items()):
        stream.sort(key=lambda item: item[0])
        latest: Send | None = None
        for _, s in stream:
            if latest is not None and s.seq < latest.seq:
                out.append((producer, partition, s.value, latest.value))
            elif latest is None or s.seq > latest.seq:
                latest = s
    return out


def summary(report: Report, *, limit: int = 5) -> str:
    """One screen: counts, each violation with a few examples, the verdict."""
    lines = [
        f"sent {report.sent}: acknowledged {report.acked}, failed {report.failed}, "
        f"indeterminate {report.indeterminate}, pending {report.pending}",
        f"read: final {report.read_final} records, live {report.read_live}; unacknowledged "
        f"but present {report.unacked_present}",
        "end offsets: " + ", ".join(f"p{p}={o}" for p, o in sorted(report.end_offsets.items())),
        "live consumer progress: "
        + (", ".join(f"p{p}={n}" for p, n in report.live_progress.items()) or "nothing read"),
    ]
    (a0, a1), (r0, r1) = report.ack_gap, report.read_gap
    lines.append(
        f"liveness over {report.last_send:.0f}s of load: longest stretch without an "
        f"acknowledgement {a1 - a0:.1f}s (t+{a0:.1f}s to t+{a1:.1f}s), without a live read "
        f"{r1 - r0:.1f}s (t+{r0:.1f}s to t+{r1:.1f}s)"
    )
    if report.events:
        lines.append("cluster events: " + ", ".join(f"{n} {name}" for name, n in report.events.items()))
    if report.errors:
        top = sorted(report.errors.items(), key=lambda kv: -kv[1])[:limit]
        lines.append("producer errors: " + ", ".join(f"{name} x{n}" for name, n in top))
    if report.live_errors:
        top = sorted(report.live_errors.items(), key=lambda kv: -kv[1])[:limit]
        lines.append("live consumer errors: " + ", ".join(f"{name} x{n}" for name, n in top))
    if report.live_behind:
        lines.append(
            "LIVE CONSUMER STOPPED RECEIVING (liveness, not a violation): "
            + "; ".join(
                f"p{p} last read offset {o} at t+{at:.1f}s, {n} acknowledged values after it "
                f"(the last acknowledged at t+{acked:.1f}s)"
                for p, (o, at, n, acked) in sorted(report.live_behind.items())
            )
        )

    def examples(items: list[str]) -> str:
        more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
        return ", ".join(items[:limit]) + more

    if report.lost:
        lines.append(f"LOST {len(report.lost)} ({len(report.vanished)} of them read live, "
                     f"then gone): {examples(report.lost)}")  # fmt: skip
    if report.duplicated:
        lines.append(f"DUPLICATED {len(report.duplicated)}: " + examples(
            [f"{v}@{w}" for v, w in report.duplicated.items()]))  # fmt: skip
        lines.extend(f"  copy {line}" for line in report.duplicate_batches)
    if report.reordered:
        lines.append(f"REORDERED {len(report.reordered)}: " + examples(
            [f"{a} before {b} (producer {p}, p{q})" for p, q, a, b in report.reordered]))  # fmt: skip
    if report.holes:
        lines.append("OFFSET HOLES: " + examples(
            [f"p{p}[{s},{e})" for p, ranges in report.holes.items() for s, e in ranges]))  # fmt: skip
    if report.inconsistent or report.ack_mismatch:
        lines.append(
            f"INCONSISTENT OFFSETS {len(report.inconsistent) + len(report.ack_mismatch)}: "
            + examples(
                [f"p{p}@{o}={vs}" for (p, o), vs in report.inconsistent.items()]
                + [f"{v} acked p{p}@{a}, read @{r}" for v, p, a, r in report.ack_mismatch]
            )
        )
    if report.unexpected:
        lines.append(f"UNEXPECTED {len(report.unexpected)}: {examples(report.unexpected)}")
    if report.poll_skips or report.poll_rewinds:
        lines.append(
            f"LIVE CONSUMER skipped {len(report.poll_skips)}x, rewound "
            f"{len(report.poll_rewinds)}x: "
            + examples([f"p{p} {a}->{b}" for p, a, b in report.poll_skips + report.poll_rewinds])
        )
    if report.final_incomplete:
        lines.append("FINAL READ INCOMPLETE: it did not reach every end offset in time")
    if report.replicas_compared:
        lines.append(
            "replicas compared below the high watermark: "
            + ", ".join(f"p{p} {n} batches" for p, n in sorted(report.replicas_compared.items()))
            + (
                f"; behind (liveness): {'; '.join(report.replicas_behind)}"
                if report.replicas_behind
                else ""
            )
        )
    if report.replicas_divergent:
        lines.append(
            f"REPLICAS DIVERGE {len(report.replicas_divergent)}: "
            + examples(report.replicas_divergent)
        )
    verdict = report.violations
    lines.append(
        "VALID" if not verdict else "INVALID: " + ", ".join(f"{k} {n}" for k, n in verdict.items())
    )
    return "\n".join(lines)
