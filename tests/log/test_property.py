"""Property test: random appends, retries, restarts, crashes, torn writes and trims
against a simple in-memory model of what the log must hold."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.storage import LogConfig, LogManager, PartitionLog
from tests.log.helpers import T0, Clock, batch, crash, manager, read_everything

CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=120, segment_index_bytes=64)
PID = 42


@dataclass
class ModelBatch:
    base: int
    values: list[bytes]
    first_seq: int  # -1: not idempotent

    @property
    def last(self) -> int:
        return self.base + len(self.values) - 1


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.booleans(), st.integers(0, 80)),
        st.tuples(st.just("retry")),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("torn"), st.floats(0, 1)),
        st.tuples(st.just("delete_records"), st.floats(0, 1)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("flush")),
    ),
    max_size=25,
)


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = Clock()
        self.batches: list[ModelBatch] = []
        self.lso = 0
        self.counter = 0
        self.m: LogManager = manager([root], self.clock, CONFIG)
        self.log: PartitionLog = self.m.create("t", 0, CONFIG)

    def records(self) -> list[tuple[int, bytes | None]]:
        return [
            (b.base + i, v)
            for b in self.batches
            for i, v in enumerate(b.values)
            if b.base + i >= self.lso
        ]

    def next_seq(self) -> int:
        idem = [b for b in self.batches if b.first_seq >= 0]
        return idem[-1].first_seq + len(idem[-1].values) if idem else 0

    def drop_from(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b.last < offset]

    def apply(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        log = self.log
        if kind == "append":
            n, idempotent, size = op[1], op[2], op[3]
            assert isinstance(n, int)
            assert isinstance(size, int)
            values = [b"%d:" % (self.counter + i) + b"x" * size for i in range(n)]
            self.counter += n
            seq = self.next_seq() if idempotent else -1
            data = batch(
                values, pid=PID if idempotent else -1, epoch=0 if idempotent else -1, seq=seq
            )
            result = log.append(data, 0, T0)
            assert result.base_offset == log.log_end_offset - n
            assert not result.duplicate
            self.batches.append(ModelBatch(result.base_offset, values, seq))
        elif kind == "retry":
            idem = [b for b in self.batches if b.first_seq >= 0]
            if idem and idem[-1].base >= self.lso:
                b = idem[-1]
                result = log.append(batch(b.values, pid=PID, epoch=0, seq=b.first_seq), 0, T0)
                assert result.duplicate
                assert (result.base_offset, result.last_offset) == (
                    b.base,
                    b.last,
                )
        elif kind == "reopen":
            if op[1]:
                self.m.close()
            else:
                crash(self.m)
            self.m = manager([self.root], self.clock, CONFIG)
            found = self.m.get("t", 0)
            assert found is not None
            self.log = found
        elif kind == "torn":
            self.tear(float(op[1]))  # type: ignore[arg-type]
        elif kind == "delete_records":
            target = self.lso + int((log.high_watermark - self.lso) * float(op[1]))  # type: ignore[arg-type]
            assert log.delete_records_before(target) == max(target, self.lso)
            self.lso = max(target, self.lso)
            self.m.checkpoint()
        elif kind == "truncate":
            target = self.lso + int((log.log_end_offset - self.lso) * float(op[1]))  # type: ignore[arg-type]
            self.m.truncate_to("t", 0, target)
            self.drop_from(target)
            self.lso = min(self.lso, log.log_end_offset)
        elif kind == "flush":
            log.flush()
            self.m.checkpoint()

    def tear(self, fraction: float) -> None:
        """Crash with the last batch half-written (only if it is past the recovery point)."""
        if not self.batches or self.batches[-1].base < self.log.recovery_point:
            return None
        if self.batches[-1].base < self.log.log_start_offset:
            return None
        crash(self.m)
        seg = max((self.root / "t-0").glob("*.log"))
        data = seg.read_bytes()
        if not data:
            return self.apply(("reopen", False))
        start = len(data) - len(batch(self.batches[-1].values, pid=0, epoch=0, seq=0))
        cut = start + int((len(data) - start) * fraction * 0.999)
        seg.write_bytes(data[:cut])
        self.batches.pop()
        self.apply(("reopen", False))
        return None

    def check(self) -> None:
        log = self.log
        expected = self.records()
        end = self.batches[-1].last + 1 if self.batches else None
        if end is not None:
            assert log.log_end_offset == end
        assert log.log_start_offset == self.lso
        assert read_everything(log) == expected
        assert log.high_watermark == log.log_end_offset


@settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(ops)
def test_random_operations_match_model(operations: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        harness = Harness(Path(root))
        for op in operations:
            harness.apply(op)
            harness.check()
        harness.apply(("reopen", False))
        harness.check()
        harness.m.close()
