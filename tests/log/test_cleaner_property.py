"""Property test: any keyed writes and tombstones, cleaned any number of times, read back.

After the final passes a full read holds exactly the last value per key at the
offset it was written (tombstones gone once delete.retention.ms has passed),
offsets strictly increasing; a consumer reading from offset 0 step by step
while a pass swaps segments under it sees only records that were written,
in offset order, and every key's latest value.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.storage import PartitionLog
from strom.storage.log.segment import LogSegment
from strom.wire.records import Codec, decode_batch, iter_batches
from tests.log.compaction import COMPACT, Seen, clean, cleaner, keyed, read_all
from tests.log.helpers import Clock, crash, manager

CONFIG = dataclasses.replace(COMPACT, segment_bytes=700, segment_ms=10**9, delete_retention_ms=500)
FILLER = b"~filler"

entry = st.tuples(st.integers(0, 6), st.one_of(st.none(), st.binary(min_size=0, max_size=30)))
op = st.one_of(
    st.tuples(
        st.just("write"), st.lists(entry, min_size=1, max_size=4), st.sampled_from(list(Codec))
    ),
    st.tuples(st.just("clean"), st.booleans()),
    st.tuples(st.just("tick"), st.integers(0, 400)),
    st.tuples(st.just("restart"), st.booleans()),
)


class Consumer:
    """Reads forward from offset 0, one small read at a time."""

    def __init__(self) -> None:
        self.position = 0
        self.seen: list[tuple[int, bytes | None, bytes | None]] = []

    def step(self, log: PartitionLog) -> bool:
        if self.position >= log.log_end_offset:
            return False
        data = log.read(max(self.position, log.log_start_offset), 150).read_bytes()
        if not data:
            return False
        for header, view in iter_batches(data, allow_partial=False):
            for r in decode_batch(view, header)[1]:
                if r.offset >= self.position:
                    self.seen.append((r.offset, r.key, r.value))
            self.position = max(self.position, header.next_offset)
        return True


def check(seen: list[Seen], written: dict[int, tuple[bytes, bytes | None]]) -> None:
    offsets = [s.offset for s in seen]
    assert offsets == sorted(set(offsets)), "offsets strictly increase"
    for s in seen:
        assert written[s.offset] == (s.key, s.value), f"offset {s.offset} changed"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=30), small_map=st.booleans())
def test_compaction_keeps_exactly_the_last_value_per_key(
    ops: list[tuple[object, ...]], small_map: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clock = Clock()
        m = manager([root], clock, CONFIG)
        log = m.create("t", 0, CONFIG)
        written: dict[int, tuple[bytes, bytes | None]] = {}
        buffer = 160 * 6 if small_map else 1 << 20
        c = cleaner(m, clock, dedupe_buffer_size=buffer, load_factor=1.0)

        def write(entries: list[tuple[bytes, bytes | None]], codec: Codec) -> None:
            result = log.append(keyed(entries, clock.now, codec=codec), 0, clock.now)
            for i, e in enumerate(entries):
                written[result.base_offset + i] = e

        def cleaned_with_a_consumer() -> None:
            consumer = Consumer()
            latest = {k: (o, v) for o, (k, v) in sorted(written.items())}
            real = log.replace_segments

            def replace(old: list[LogSegment], base: int | None, generation: int) -> bool:
                consumer.step(log)
                check(read_all(log, start=0), written)
                done = real(old, base, generation)
                consumer.step(log)
                return done

            log.replace_segments = replace  # type: ignore[method-assign]
            try:
                clean(c, log)
            finally:
                del log.replace_segments
            while consumer.step(log):
                pass
            got = {(o, k, v) for o, k, v in consumer.seen}
            assert [o for o, _, _ in consumer.seen] == sorted({o for o, _, _ in consumer.seen})
            for o, k, v in consumer.seen:
                assert written[o] == (k, v)
            for key, (offset, value) in latest.items():
                if value is not None:
                    assert (offset, key, value) in got, f"lost the latest value of {key!r}"

        for step in ops:
            if step[0] == "write":
                entries = [(b"key%d" % k, v) for k, v in step[1]]  # type: ignore[attr-defined]
                write(entries, step[2])  # type: ignore[arg-type]
                clock.now += 1
            elif step[0] == "clean":
                if step[1]:
                    cleaned_with_a_consumer()
                else:
                    clean(c, log)
            elif step[0] == "tick":
                clock.now += step[1]  # type: ignore[operator]
            else:
                if step[1]:
                    m.close()
                else:
                    crash(m)
                m = manager([root], clock, CONFIG)
                found = m.get("t", 0)
                assert found is not None
                log = found
                c = cleaner(m, clock, dedupe_buffer_size=buffer, load_factor=1.0)
            check(read_all(log), written)

        # Roll everything out of the active segment, then clean until nothing is left to do,
        # and again once delete.retention.ms has passed for the tombstones.
        clock.now += CONFIG.segment_ms + 10
        log.append(keyed([(FILLER, b"")], clock.now), 0, clock.now)
        for _ in range(2):
            for _ in range(40):
                if clean(c, log) is None or log.clean_offset == log.segments[-1].base_offset:
                    break
            clock.now += CONFIG.delete_retention_ms
        for _ in range(40):
            if not c.clean_once():
                break
        seen = read_all(log)
        check([s for s in seen if s.key != FILLER], written)
        expected = {}
        for offset, (key, value) in sorted(written.items()):
            expected[key] = (offset, value)
        assert {s.key: (s.offset, s.value) for s in seen if s.key != FILLER} == {
            k: ov for k, ov in expected.items() if ov[1] is not None
        }
        assert len([s for s in seen if s.key != FILLER]) == len(
            [1 for ov in expected.values() if ov[1] is not None]
        )
        m.close()
