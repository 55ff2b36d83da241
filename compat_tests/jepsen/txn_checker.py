"""The transactional checker: what a history of transactions and read_committed reads proves
(pure, no I/O).

Modelled on the anomalies Jepsen's Kafka workload reports (`jepsen.tests.kafka`, the Redpanda
and Bufstream analyses), written for this repo's history shape: every value is unique, so a
read names the transaction that wrote it.

The *version order* of a partition is the sequence of values the final read_committed read
of the whole log returned, in offset order (offsets themselves have gaps: markers and
aborted records take offsets and are never returned).

Violations:

- lost: a value of a committed transaction (its commit acknowledged) missing from the final
  read; also any value some consumer read (it was committed) that the final read lacks.
- torn: a transaction of unknown outcome (its commit neither acknowledged nor refused) whose
  values are partly in the final read: a transaction is all or nothing.
- aborted read: a value of an aborted transaction read by a read_committed consumer (live or
  final): Adya's G1a.
- duplicated: one value at two or more (partition, offset).
- inconsistent offsets: one (partition, offset) read with two values, or a value read at an
  offset other than the one its delivery report named.
- unexpected: a value nobody sent.
- poll skips and nonmonotonic polls: per consumer and partition, each value received must be
  the next one in the version order after the previous one it received there (consumers
  start at the log's beginning): a value further on skipped some, one at or before went back.
- G0 and G1c: cycles in the graph of committed transactions with an edge T1 -> T2 when
  - ww: T2's value follows T1's directly in a partition's version order;
  - wr: T2 read T1's value (T2's last read of each partition, as Jepsen draws them).
  A cycle of ww edges only is G0 (write cycle); one with a wr edge is G1c (circular
  information flow). Cycles are found with Tarjan's strongly connected components.
- group offsets: the offsets a worker's group holds at the end are not those the last
  committed transaction sent (or a later one of unknown outcome): an aborted transaction's
  offsets became visible, or a committed one's were lost.
- final read incomplete; replica divergence (as in the queue checker).

Reported, not judged: stuck workers, whose transactional call never returned once the load
stopped although every call has a timeout. librdkafka's `send_offsets_to_transaction` can
block past its timeout when the group coordinator disappears from Metadata (a killed node;
librdkafka issues 5456 and 5511).

Kafka does not isolate the writes of concurrent transactions: two producers writing the same
two partitions may append in opposite orders, a G0 that Kafka's design allows (Jepsen's
Redpanda analysis, 3.6; its Kafka test has `--no-ww-deps` for it). So a cycle counts as a
violation only if it remains when ww edges that such interleaving explains are left out: a
ww edge T1 -> T2 between transactions of *different* workers whose lifetimes overlapped
(first send to commit acknowledgement; unknown outcomes never end), unless T1 read T2's
value (then T2 committed before T1 wrote anything). The cycles interleaving explains are
counted and reported, not judged; `strict=True` judges every cycle (Jepsen's default).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

TxnOutcome = Literal["pending", "committed", "aborted", "indeterminate"]
FINAL = "final"
"""The consumer name of the final read."""


@dataclass
class TxnSend:
    value: str
    partition: int
    offset: int | None = None
    """The offset its delivery report named (None: no report, or an error)."""


@dataclass(frozen=True)
class TxnRead:
    """One record a read_committed consumer received."""

    consumer: str
    partition: int
    offset: int
    value: str
    at: float = 0.0


@dataclass
class Txn:
    """One transaction of a worker (a transactional producer beside a read_committed
    consumer): what it read before writing, what it wrote, how it ended."""

    id: str
    worker: int
    sends: list[TxnSend] = field(default_factory=list)
    reads: list[TxnRead] = field(default_factory=list)
    """What the worker's consumer returned in this transaction (before its sends)."""
    offsets: dict[int, int] = field(default_factory=dict)
    """The consumer positions it sent with send_offsets_to_transaction."""
    intent: Literal["commit", "abort"] = "commit"
    outcome: TxnOutcome = "pending"
    error: str = ""
    started: float = 0.0
    """Seconds since the load began, at its first send."""
    finished: float | None = None
    """When its commit or abort was acknowledged (None: never, or unknown outcome)."""


@dataclass
class TxnHistory:
    txns: list[Txn]
    reads: list[TxnRead]
    """Every read: the workers' consumers' (in the order each received them) and the final's."""
    partitions: int
    end_offsets: dict[int, int] = field(default_factory=dict)
    final_complete: bool = True
    group_offsets: dict[int, dict[int, int]] | None = None
    """Worker -> the offsets its group held at the end (None: not asked)."""
    consumer_errors: dict[str, int] = field(default_factory=dict)
    stuck: list[str] = field(default_factory=list)
    """Workers whose transactional call never returned after the load stopped (liveness)."""
    replicas_divergent: list[str] = field(default_factory=list)
    replicas_behind: list[str] = field(default_factory=list)
    replicas_compared: dict[int, int] = field(default_factory=dict)


Edge = tuple[str, str, str]
"""(from txn, to txn, "ww" or "wr")."""
MAX_STARTS = 50
"""A G1c example is searched through at most this many wr edges of a component (a long run's
component of concurrent writers can hold thousands)."""


@dataclass
class Cycle:
    kind: Literal["G0", "G1c"]
    steps: list[Edge]
    allowed: bool
    """Concurrent writers explain it (Kafka does not isolate them): reported, not judged."""

    def describe(self) -> str:
        path = "".join(f"{a} -{k}-> " for a, _, k in self.steps) + self.steps[0][0]
        return f"{self.kind}: {path}"


@dataclass
class TxnReport:
    txns: int = 0
    committed: int = 0
    aborted: int = 0
    aborted_on_purpose: int = 0
    indeterminate: int = 0
    indeterminate_visible: int = 0
    """Transactions of unknown outcome whose values the final read holds (they committed)."""
    values_sent: int = 0
    read_final: int = 0
    read_live: int = 0
    lost: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    aborted_reads: list[tuple[str, str]] = field(default_factory=list)
    """(consumer, value)."""
    duplicated: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    inconsistent: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    ack_mismatch: list[tuple[str, int, int, int]] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    poll_skips: list[tuple[str, int, str, str]] = field(default_factory=list)
    """(consumer, partition, previous value or "", next value): values between them unread."""
    nonmonotonic: list[tuple[str, int, str, str]] = field(default_factory=list)
    edges: dict[str, int] = field(default_factory=dict)
    """Edge kind -> how many the graph holds."""
    cycles: list[Cycle] = field(default_factory=list)
    group_offsets: list[str] = field(default_factory=list)
    groups_checked: int = 0
    stuck: list[str] = field(default_factory=list)
    final_incomplete: bool = False
    end_offsets: dict[int, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    consumer_errors: dict[str, int] = field(default_factory=dict)
    replicas_divergent: list[str] = field(default_factory=list)
    replicas_behind: list[str] = field(default_factory=list)
    replicas_compared: dict[int, int] = field(default_factory=dict)

    def judged(self, kind: str) -> list[Cycle]:
        return [c for c in self.cycles if c.kind == kind and not c.allowed]

    @property
    def violations(self) -> dict[str, int]:
        counts = {
            "lost": len(self.lost),
            "torn": len(self.torn),
            "aborted reads": len(self.aborted_reads),
            "duplicated": len(self.duplicated),
            "inconsistent offsets": len(self.inconsistent) + len(self.ack_mismatch),
            "unexpected values": len(self.unexpected),
            "poll skips": len(self.poll_skips),
            "nonmonotonic polls": len(self.nonmonotonic),
            "G0": len(self.judged("G0")),
            "G1c": len(self.judged("G1c")),
            "group offsets": len(self.group_offsets),
            "final read incomplete": int(self.final_incomplete),
            "replica divergence": len(self.replicas_divergent),
        }
        return {name: n for name, n in counts.items() if n}

    @property
    def ok(self) -> bool:
        return not self.violations


def check(history: TxnHistory, *, strict: bool = False) -> TxnReport:
    report = TxnReport(end_offsets=dict(history.end_offsets))
    report.final_incomplete = not history.final_complete
    report.consumer_errors = dict(history.consumer_errors)
    report.stuck = list(history.stuck)
    report.replicas_divergent = list(history.replicas_divergent)
    report.replicas_behind = list(history.replicas_behind)
    report.replicas_compared = dict(history.replicas_compared)
    txns = {t.id: t for t in history.txns}
    writer: dict[str, Txn] = {}
    acked_at: dict[str, tuple[int, int]] = {}
    for t in history.txns:
        report.txns += 1
        if t.outcome == "committed":
            report.committed += 1
        elif t.outcome == "aborted":
            report.aborted += 1
            report.aborted_on_purpose += t.intent == "abort"
        else:
            report.indeterminate += 1
        if t.error:
            report.errors[t.error] = report.errors.get(t.error, 0) + 1
        for s in t.sends:
            report.values_sent += 1
            writer[s.value] = t
            if s.offset is not None:
                acked_at[s.value] = (s.partition, s.offset)

    at: dict[tuple[int, int], set[str]] = defaultdict(set)
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)
    final: dict[int, dict[int, str]] = defaultdict(dict)
    for r in history.reads:
        at[(r.partition, r.offset)].add(r.value)
        where[r.value].add((r.partition, r.offset))
        if r.consumer == FINAL:
            report.read_final += 1
            final[r.partition][r.offset] = r.value
        else:
            report.read_live += 1
    for value, (p, o) in acked_at.items():
        if value in where:
            at[(p, o)].add(value)
    report.inconsistent = {k: sorted(v) for k, v in sorted(at.items()) if len(v) > 1}
    report.duplicated = {v: sorted(w) for v, w in sorted(where.items()) if len(w) > 1}
    report.unexpected = sorted(v for v in where if v not in writer)
    for value, (p, o) in sorted(acked_at.items()):
        seen = where.get(value)
        if seen and (p, o) not in seen:
            report.ack_mismatch.append((value, p, o, min(seen)[1]))

    aborted = {v for v, t in writer.items() if t.outcome == "aborted"}
    order: dict[int, list[str]] = {
        p: [v for _, v in sorted(final[p].items()) if v not in aborted] for p in final
    }  # an aborted value read is reported as such, and is no version
    in_final = {v for vs in order.values() for v in vs}
    index = {v: i for vs in order.values() for i, v in enumerate(vs)}

    for r in history.reads:
        w = writer.get(r.value)
        if w is not None and w.outcome == "aborted":
            report.aborted_reads.append((r.consumer, r.value))
    visible: set[str] = set()
    for t in history.txns:
        values = [s.value for s in t.sends]
        present = [v for v in values if v in in_final]
        if t.outcome == "committed":
            report.lost += [v for v in values if v not in in_final]
        elif t.outcome in ("indeterminate", "pending") and present:
            report.indeterminate_visible += 1
            if len(present) != len(values):
                report.torn.append(t.id)
        if t.outcome != "aborted" and (t.outcome == "committed" or present):
            visible.add(t.id)
    report.lost += sorted(
        v for v in where if v in writer and v not in in_final and v not in report.lost
        and writer[v].outcome != "aborted"
    )  # fmt: skip

    report.poll_skips, report.nonmonotonic = _poll_order(history.reads, order, index)
    edges = _edges(history, order, writer, txns, visible)
    for _, _, kind in edges:
        report.edges[kind] = report.edges.get(kind, 0) + 1
    report.cycles = _cycles(edges, txns, strict)
    report.group_offsets = _group_offsets(history)
    report.groups_checked = len(history.group_offsets or {})
    return report


def _poll_order(
    reads: list[TxnRead], order: dict[int, list[str]], index: dict[str, int]
) -> tuple[list[tuple[str, int, str, str]], list[tuple[str, int, str, str]]]:
    skips: list[tuple[str, int, str, str]] = []
    back: list[tuple[str, int, str, str]] = []
    last: dict[tuple[str, int], int] = {}
    for r in reads:
        if r.consumer == FINAL or r.value not in index:
            continue  # a value outside the version order is reported as lost or aborted
        key = (r.consumer, r.partition)
        before = last.get(key, -1)
        i = index[r.value]
        previous = order[r.partition][before] if before >= 0 else ""
        if i > before + 1:
            skips.append((r.consumer, r.partition, previous, r.value))
        elif i <= before:
            back.append((r.consumer, r.partition, previous, r.value))
        last[key] = i
    return skips, back


def _edges(
    history: TxnHistory,
    order: dict[int, list[str]],
    writer: dict[str, Txn],
    txns: dict[str, Txn],
    visible: set[str],
) -> set[Edge]:
    edges: set[Edge] = set()
    for values in order.values():
        for a, b in itertools.pairwise(values):
            ta, tb = writer.get(a), writer.get(b)
            if ta is None or tb is None or ta.id == tb.id:
                continue
            if ta.id in visible and tb.id in visible:
                edges.add((ta.id, tb.id, "ww"))
    for t in history.txns:
        if t.id not in visible:
            continue
        last: dict[int, TxnRead] = {}
        for r in t.reads:
            if r.offset >= last.get(r.partition, r).offset:
                last[r.partition] = r
        for r in last.values():
            w = writer.get(r.value)
            if w is not None and w.id != t.id and w.id in visible:
                edges.add((w.id, t.id, "wr"))
    return edges


def _explained(edge: Edge, txns: dict[str, Txn], edges: set[Edge]) -> bool:
    """A ww edge that concurrent writers of different workers explain (the docstring)."""
    a, b, kind = edge
    if kind != "ww":
        return False
    ta, tb = txns[a], txns[b]
    if ta.worker == tb.worker or (b, a, "wr") in edges:
        return False
    end_a = ta.finished if ta.finished is not None else math.inf
    end_b = tb.finished if tb.finished is not None else math.inf
    return ta.started <= end_b and tb.started <= end_a


def _cycles(edges: set[Edge], txns: dict[str, Txn], strict: bool) -> list[Cycle]:
    """One example cycle per kind and strongly connected component: first in the graph
    without the explained edges (judged), then in the whole graph (allowed: only those whose
    component holds no judged one)."""
    judged_edges = edges if strict else {e for e in edges if not _explained(e, txns, edges)}
    out: list[Cycle] = []
    judged: list[tuple[str, set[str]]] = []
    passes = [(judged_edges, False)] + ([] if strict else [(edges, True)])
    for graph, allowed in passes:
        for kind, kinds in (("G0", {"ww"}), ("G1c", {"ww", "wr"})):
            sub = {e for e in graph if e[2] in kinds}
            for component in strongly_connected(sub):
                if allowed and any(k == kind and c <= component for k, c in judged):
                    continue
                inner = [e for e in sub if e[0] in component and e[1] in component]
                steps = _cycle_through(inner, need_wr=kind == "G1c")
                if steps is None:
                    continue
                if not allowed:
                    judged.append((kind, component))
                out.append(Cycle("G0" if kind == "G0" else "G1c", steps, allowed))
    return out


def strongly_connected(edges: Iterable[Edge]) -> list[set[str]]:
    """Tarjan's algorithm (iterative): the components with more than one node."""
    graph: dict[str, list[str]] = defaultdict(list)
    for a, b, _ in edges:
        graph[a].append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            successors = graph[node]
            if i < len(successors):
                work.append((node, i + 1))
                nxt = successors[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def _cycle_through(edges: list[Edge], *, need_wr: bool) -> list[Edge] | None:
    """A shortest cycle in a strongly connected edge set; with `need_wr`, through a wr edge."""
    succ: dict[str, list[Edge]] = defaultdict(list)
    for e in sorted(edges):
        succ[e[0]].append(e)
    starts = [e for e in sorted(edges) if e[2] == "wr"][:MAX_STARTS] if need_wr else sorted(edges)[:1]
    best: list[Edge] | None = None
    for first in starts:
        path = _path(succ, first[1], first[0])
        if path is not None and (best is None or len(path) + 1 < len(best)):
            best = [first, *path]
    return best


def _path(succ: dict[str, list[Edge]], start: str, goal: str) -> list[Edge] | None:
    if start == goal:
        return []
    came: dict[str, Edge] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for e in succ.get(node, []):
            if e[1] in seen:
                continue
            came[e[1]] = e
            if e[1] == goal:
                out = [e]
                while out[-1][0] != start:
                    out.append(came[out[-1][0]])
                return out[::-1]
            seen.add(e[1])
            queue.append(e[1])
    return None


def _group_offsets(history: TxnHistory) -> list[str]:
    if history.group_offsets is None:
        return []
    out: list[str] = []
    by_worker: dict[int, list[Txn]] = defaultdict(list)
    for t in history.txns:
        if t.offsets:
            by_worker[t.worker].append(t)
    for worker in sorted(set(by_worker) | set(history.group_offsets)):
        held = history.group_offsets.get(worker, {})
        candidates: list[dict[int, int]] = []
        for t in reversed(by_worker.get(worker, [])):
            if t.outcome in ("indeterminate", "pending"):
                candidates.append(t.offsets)
            elif t.outcome == "committed":
                candidates.append(t.offsets)
                break
        if not candidates:
            candidates.append({})
        if held not in candidates:
            out.append(f"worker {worker}'s group holds {held}, expected one of {candidates}")
    return out


def summary(report: TxnReport, *, limit: int = 5) -> str:
    """One screen: counts, each violation with a few examples, the verdict."""

    def examples(items: list[str]) -> str:
        more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
        return ", ".join(items[:limit]) + more

    lines = [
        f"transactions {report.txns}: committed {report.committed}, aborted {report.aborted} "
        f"({report.aborted_on_purpose} on purpose), unknown outcome {report.indeterminate} "
        f"({report.indeterminate_visible} of them visible); values sent {report.values_sent}",
        f"read: final {report.read_final} records, by the workers' consumers {report.read_live}",
        "end offsets: " + ", ".join(f"p{p}={o}" for p, o in sorted(report.end_offsets.items())),
        "dependency graph: " + (", ".join(f"{k} {n}" for k, n in sorted(report.edges.items()))
                                or "no edges"),
    ]  # fmt: skip
    if report.groups_checked:
        lines.append(f"transactional group offsets checked: {report.groups_checked} groups")
    allowed = [c for c in report.cycles if c.allowed]
    if allowed:
        lines.append(
            f"cycles concurrent writers explain (Kafka allows them, not judged): {len(allowed)}: "
            + examples([c.describe() for c in allowed])
        )
    if report.errors:
        top = sorted(report.errors.items(), key=lambda kv: -kv[1])[:limit]
        lines.append("transaction errors: " + ", ".join(f"{name} x{n}" for name, n in top))
    if report.consumer_errors:
        top = sorted(report.consumer_errors.items(), key=lambda kv: -kv[1])[:limit]
        lines.append("consumer errors: " + ", ".join(f"{name} x{n}" for name, n in top))
    if report.lost:
        lines.append(f"LOST {len(report.lost)}: {examples(report.lost)}")
    if report.torn:
        lines.append(f"TORN {len(report.torn)}: {examples(report.torn)}")
    if report.aborted_reads:
        lines.append(f"ABORTED READS {len(report.aborted_reads)}: "
                     + examples([f"{v} by {c}" for c, v in report.aborted_reads]))  # fmt: skip
    if report.duplicated:
        lines.append(f"DUPLICATED {len(report.duplicated)}: "
                     + examples([f"{v}@{w}" for v, w in report.duplicated.items()]))  # fmt: skip
    if report.inconsistent or report.ack_mismatch:
        lines.append(
            f"INCONSISTENT OFFSETS {len(report.inconsistent) + len(report.ack_mismatch)}: "
            + examples([f"p{p}@{o}={vs}" for (p, o), vs in report.inconsistent.items()]
                       + [f"{v} acked p{p}@{a}, read @{r}" for v, p, a, r in report.ack_mismatch])
        )  # fmt: skip
    if report.unexpected:
        lines.append(f"UNEXPECTED {len(report.unexpected)}: {examples(report.unexpected)}")
    for name, found in (("POLL SKIPS", report.poll_skips), ("NONMONOTONIC POLLS", report.nonmonotonic)):
        if found:
            lines.append(f"{name} {len(found)}: " + examples(
                [f"{c} p{p} {a or '(start)'} -> {b}" for c, p, a, b in found]))  # fmt: skip
    for kind in ("G0", "G1c"):
        judged = report.judged(kind)
        if judged:
            lines.append(f"{kind} {len(judged)}: " + examples([c.describe() for c in judged]))
    if report.group_offsets:
        lines.append(f"GROUP OFFSETS {len(report.group_offsets)}: {examples(report.group_offsets)}")
    if report.stuck:
        lines.append(f"STUCK WORKERS (liveness, not judged; librdkafka issues 5456 and 5511) "
                     f"{len(report.stuck)}: {examples(report.stuck)}")  # fmt: skip
    if report.final_incomplete:
        lines.append("FINAL READ INCOMPLETE: it did not reach every end offset in time")
    if report.replicas_compared:
        lines.append(
            "replicas compared below the high watermark: "
            + ", ".join(f"p{p} {n} batches" for p, n in sorted(report.replicas_compared.items()))
            + (f"; behind (liveness): {'; '.join(report.replicas_behind)}"
               if report.replicas_behind else "")
        )  # fmt: skip
    if report.replicas_divergent:
        lines.append(f"REPLICAS DIVERGE {len(report.replicas_divergent)}: "
                     + examples(report.replicas_divergent))  # fmt: skip
    verdict = report.violations
    lines.append(
        "VALID" if not verdict else "INVALID: " + ", ".join(f"{k} {n}" for k, n in verdict.items())
    )
    return "\n".join(lines)
