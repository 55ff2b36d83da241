"""Property test: the cleaner on random transactional workloads (keyed records from plain and
transactional producers, commits, aborts, cleaning passes at advancing times, restarts). What
a read_committed consumer reads must only ever be plain or committed records, and always hold
the latest committed value of every key below the last stable offset."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.storage import LogManager, PartitionLog
from strom.wire.records import Record, build_batch, iter_batches
from strom.wire.records.builder import decode_batch
from tests.log.compaction import COMPACT, clean, cleaner
from tests.log.helpers import T0, Clock, manager

PIDS = (5, 6)
KEYS = 4

ops = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), st.integers(0, KEYS - 1)),
        st.tuples(st.just("txn"), st.integers(0, 1), st.integers(0, KEYS - 1)),
        st.tuples(st.just("end"), st.integers(0, 1), st.booleans()),
        st.tuples(st.just("filler")),
        st.tuples(st.just("clean"), st.integers(0, 2)),
        st.tuples(
            st.just("reopen"),
        ),
    ),
    max_size=50,
)


def committed_view(log: PartitionLog) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) a read_committed consumer reads, skipping aborted transactions."""
    out: list[tuple[int, bytes, bytes]] = []
    offset, lso = log.log_start_offset, log.last_stable_offset
    pending: list[tuple[int, int]] = []
    aborting: set[int] = set()
    while offset < lso:
        result = log.read(offset, 1 << 20, max_offset=lso, aborted=True)
        if not result.size:
            break
        assert result.aborted_transactions is not None
        pending = sorted(
            pending + [(t.first_offset, t.producer_id) for t in result.aborted_transactions]
        )
        for header, view in iter_batches(result.read_bytes(), allow_partial=False):
            while pending and pending[0][0] <= header.last_offset:
                aborting.add(pending.pop(0)[1])
            if header.is_control:
                aborting.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in aborting):
                for r in decode_batch(view, header)[1]:
                    if r.offset >= offset and r.key is not None and r.value is not None:
                        out.append((r.offset, r.key, r.value))
            offset = header.next_offset
    return out


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = Clock()
        self.m: LogManager = manager([root], self.clock, COMPACT)
        self.log = self.m.create("t", 0, COMPACT)
        self.seq = dict.fromkeys(PIDS, 0)
        self.open: dict[int, list[tuple[int, bytes, bytes]]] = {pid: [] for pid in PIDS}
        self.decided: list[tuple[int, bytes, bytes]] = []
        """Plain and committed records: what may ever be visible."""
        self.counter = 0

    def record(self, key: int) -> tuple[bytes, bytes]:
        self.counter += 1
        return b"k%d" % key, b"v%d" % self.counter

    def apply(self, op: tuple[object, ...]) -> None:
        kind, log, now = op[0], self.log, self.clock()
        if kind == "plain":
            key, value = self.record(int(op[1]))  # type: ignore[call-overload]
            base = log.append(build_batch([Record(key, value, (), T0)]), 0, now).base_offset
            self.decided.append((base, key, value))
        elif kind == "filler":
            for i in range(8):
                filler = build_batch([Record(b"f%d" % i, b"x" * 60, (), T0)])
                base = log.append(filler, 0, now).base_offset
                self.decided.append((base, b"f%d" % i, b"x" * 60))
        elif kind == "txn":
            pid = PIDS[int(op[1])]  # type: ignore[call-overload]
            key, value = self.record(int(op[2]))  # type: ignore[call-overload]
            data = build_batch(
                [Record(key, value, (), T0)], producer_id=pid, producer_epoch=0,
                base_sequence=self.seq[pid], transactional=True,
            )  # fmt: skip
            base = log.append(data, 0, now).base_offset
            self.seq[pid] += 1
            self.open[pid].append((base, key, value))
        elif kind == "end":
            pid = PIDS[int(op[1])]  # type: ignore[call-overload]
            log.append_marker(pid, 0, 0, bool(op[2]), 0, now)
            if op[2]:
                self.decided += self.open[pid]
            self.open[pid] = []
        elif kind == "clean":
            self.clock.now += int(op[1]) * COMPACT.delete_retention_ms  # type: ignore[call-overload]
            clean(cleaner(self.m, self.clock), log)
        elif kind == "reopen":
            self.m.close()
            self.m = manager([self.root], self.clock, COMPACT)
            found = self.m.get("t", 0)
            assert found is not None
            self.log = found

    def check(self) -> None:
        seen = committed_view(self.log)
        decided = set(self.decided)
        assert set(seen) <= decided, set(seen) - decided  # never an aborted or open record
        lso = self.log.last_stable_offset
        latest: dict[bytes, tuple[int, bytes, bytes]] = {}
        for rec in sorted(r for r in self.decided if r[0] < lso):
            latest[rec[1]] = rec
        assert set(latest.values()) <= set(seen), set(latest.values()) - set(seen)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops)
def test_cleaning_transactional_data_keeps_committed_values(
    operations: list[tuple[object, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(Path(tmp))
        for op in operations:
            h.apply(op)
            h.check()
        h.m.close()
