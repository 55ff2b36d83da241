"""Property test: random transactional workloads (several producers, commits, aborts, plain
writes, segment rolls, clean restarts, crashes, truncations) against a model of what a
read_committed consumer must see, the last stable offset and the aborted transactions; a
follower copying the leader byte for byte must end in the same state."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.storage import LogConfig, LogManager, PartitionLog
from strom.storage.log.txn_index import AbortedTxn
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode
from tests.log.helpers import T0, Clock, batch, crash, manager, open_log
from tests.log.test_transactions import committed_read

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=100)
PIDS = (11, 22, 33)


@dataclass
class Txn:
    pid: int
    first: int
    values: list[tuple[int, bytes]] = field(default_factory=list)
    end: int | None = None
    committed: bool = False


@dataclass
class Producer:
    seq: int = 0
    open: Txn | None = None


ops = st.lists(
    st.one_of(
        st.tuples(st.just("txn"), st.integers(0, 2), st.integers(1, 3)),
        st.tuples(st.just("idempotent"), st.integers(0, 2)),
        st.tuples(st.just("plain"), st.integers(1, 3)),
        st.tuples(st.just("end"), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("truncate"), st.integers(1, 4)),
    ),
    max_size=40,
)


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = Clock()
        self.m: LogManager = manager([root], self.clock, CONFIG)
        self.log: PartitionLog = self.m.create("t", 0, CONFIG)
        self.producers = {pid: Producer() for pid in PIDS}
        self.plain: list[tuple[int, bytes]] = []
        self.txns: list[Txn] = []
        self.aborted: list[AbortedTxn] = []
        self.counter = 0
        self.replaying = False
        self.history: list[tuple[tuple[object, ...], int]] = []
        """Every append done with the log end after it, to replay into a fresh model after a
        truncation."""

    def value(self) -> bytes:
        self.counter += 1
        return b"v%d" % self.counter

    def apply(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        if kind == "reopen":
            if op[1]:
                self.m.close()
            else:
                crash(self.m)
            self.m = manager([self.root], self.clock, CONFIG)
            found = self.m.get("t", 0)
            assert found is not None
            self.log = found
            return
        if kind == "truncate":
            target = max(0, self.log.log_end_offset - int(op[1]))  # type: ignore[call-overload]
            self.m.truncate_to("t", 0, target)
            self.rebuild_model(target)
            return
        self.append(op)

    def append(self, op: tuple[object, ...]) -> None:
        self._append(op)
        self.history.append((op, self.log.log_end_offset))

    def _append(self, op: tuple[object, ...]) -> None:
        kind, log = op[0], self.log
        if kind == "plain":
            values = [self.value() for _ in range(int(op[1]))]  # type: ignore[call-overload]
            base = log.append(batch(values), 0, T0).base_offset
            self.plain += [(base + i, v) for i, v in enumerate(values)]
        elif kind in ("txn", "idempotent"):
            pid = PIDS[int(op[1])]  # type: ignore[call-overload]
            producer = self.producers[pid]
            n = int(op[2]) if kind == "txn" else 1  # type: ignore[call-overload]
            values = [self.value() for _ in range(n)]
            data = batch(values, pid=pid, epoch=0, seq=producer.seq, transactional=kind == "txn")
            if kind == "idempotent" and producer.open is not None:
                if not self.replaying:
                    with pytest.raises(LogAppendError) as refused:
                        log.append(data, 0, T0)
                    assert refused.value.error == ErrorCode.INVALID_TXN_STATE
                return
            base = log.append(data, 0, T0).base_offset
            producer.seq += n
            records = [(base + i, v) for i, v in enumerate(values)]
            if kind == "txn":
                if producer.open is None:
                    producer.open = Txn(pid, base)
                    self.txns.append(producer.open)
                producer.open.values += records
            else:
                self.plain += records
        elif kind == "end":
            pid = PIDS[int(op[1])]  # type: ignore[call-overload]
            commit = bool(op[2])
            producer = self.producers[pid]
            offset = log.append_marker(pid, 0, 0, commit, 0, T0).base_offset
            txn = producer.open
            if txn is not None:
                txn.end, txn.committed = offset, commit
                producer.open = None
                if not commit:
                    others = [p.open.first for p in self.producers.values() if p.open is not None]
                    lso = min(others, default=offset + 1)
                    self.aborted.append(AbortedTxn(pid, txn.first, offset, lso))

    def rebuild_model(self, end: int) -> None:
        """The model of the log cut at `end`: replay the appends, dropping what lies past it
        (producer sequences as the log keeps them: a truncated batch's sequence is free)."""
        kept = [op for op, after in self.history if after <= end]
        self.history = []
        self.producers = {pid: Producer() for pid in PIDS}
        self.plain, self.txns, self.aborted, self.counter = [], [], [], 0
        real = self.log
        self.log = _Counting()  # type: ignore[assignment]
        self.replaying = True
        for op in kept:
            self.append(op)
        self.replaying = False
        self.log = real

    def expected(self) -> tuple[list[bytes], int]:
        lso = min((t.first for t in self.txns if t.end is None), default=self.log.log_end_offset)
        visible = list(self.plain)
        for t in self.txns:
            if t.end is not None and t.committed:
                visible += t.values
        return [v for o, v in sorted(visible) if o < lso], lso

    def check(self, log: PartitionLog | None = None) -> None:
        log = log or self.log
        values, lso = self.expected()
        assert log.last_stable_offset == lso
        seen, _ = committed_read(log)
        assert seen == values
        assert log.aborted_transactions(0, log.log_end_offset) == self.aborted


class _Counting:
    """Stands in for the log while the model replays its history: hands out the offsets the
    real appends got, without writing anything."""

    def __init__(self) -> None:
        self.log_end_offset = 0

    def append(self, data: bytearray, *_: object) -> _Result:
        from strom.wire.records.batch import BatchHeader

        header = BatchHeader.parse(data)
        base = self.log_end_offset
        self.log_end_offset += header.record_count
        return _Result(base)

    def append_marker(self, *_: object) -> _Result:
        base = self.log_end_offset
        self.log_end_offset += 1
        return _Result(base)


@dataclass
class _Result:
    base_offset: int


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops)
def test_transactions_match_the_model(operations: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(Path(tmp))
        for op in operations:
            h.apply(op)
            h.check()
        follower = open_log(Path(tmp) / "follower")
        follower.high_watermark_follows_appends = False
        leader = h.log
        offset = leader.log_start_offset
        while offset < leader.log_end_offset:
            result = leader.read(offset, 1 << 20)
            follower.append_replicated(result.read_bytes(), T0)
            offset = follower.log_end_offset
        follower.update_high_watermark(leader.high_watermark)
        h.check(follower)
        h.m.close()
