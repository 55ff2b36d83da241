"""Real kill -9: a child process appends and cleans (or trims by retention) until SIGKILLed.

Every record describes itself (key and value are functions of its offset), so
after any number of kills the parent can check what it reads without knowing
which appends finished: every record is one that was written at that offset,
offsets only go up, and each key's newest acknowledged write (or a newer one)
is still there; under retention, whatever is left is a gapless suffix.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from strom.storage import LogConfig
from tests.log.compaction import COMPACT, Seen, clean, cleaner, keyed, read_all
from tests.log.helpers import T0, Clock, manager

ROOT = Path(__file__).resolve().parents[2]
KEYS = 23
MODES = {
    "clean": dataclasses.replace(COMPACT, segment_bytes=4000, delete_retention_ms=10**9),
    "retention": LogConfig(segment_bytes=4000, retention_bytes=12_000),
}


def key_of(offset: int) -> bytes:
    return b"k%d" % (offset * 7919 % KEYS)


def value_of(offset: int) -> bytes | None:
    return None if offset % 11 == 0 else b"value-of-%d" % offset


def child(root: str, mode: str) -> None:
    """Append forever, cleaning or enforcing retention every 150 records; report progress."""
    config = MODES[mode]
    clock = Clock()
    m = manager([Path(root)], clock, config)
    log = m.create("t", 0, config)
    c = cleaner(m, clock, max_io_bytes_per_second=300_000.0)  # slow passes: easier to hit
    while True:
        for _ in range(150):
            offset = log.log_end_offset
            log.append(keyed([(key_of(offset), value_of(offset))], T0), 0, clock())
            print(f"acked {offset}", flush=True)
        print("working", flush=True)
        if mode == "clean":
            clean(c, log)
        else:
            log.enforce_retention(clock())


def run_until_killed(root: Path, mode: str, rng: random.Random, acked: list[int]) -> None:
    code = f"from tests.log.test_cleaner_kill import child; child({str(root)!r}, {mode!r})"
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        rounds = rng.randint(1, 3)
        for line in process.stdout:
            if line.startswith("acked "):
                acked.append(int(line.split()[1]))
            elif line.startswith("working"):
                rounds -= 1
                if rounds == 0:
                    time.sleep(rng.uniform(0, 0.08))  # somewhere inside the pass
                    os.kill(process.pid, signal.SIGKILL)
                    break
        else:
            raise AssertionError(f"child ended on its own: {process.stderr.read()}")
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL


@pytest.mark.parametrize("mode", sorted(MODES))
def test_kill_9_while_cleaning_or_deleting_segments(tmp_path: Path, mode: str) -> None:
    rng = random.Random(5)
    acked: list[int] = []
    for _ in range(4):
        run_until_killed(tmp_path, mode, rng, acked)
        m = manager([tmp_path], Clock(), MODES[mode])
        log = m.get("t", 0)
        assert log is not None
        assert not [p for p in log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]
        seen = read_all(log)
        assert log.log_end_offset > max(acked)
        offsets = [s.offset for s in seen]
        assert offsets == sorted(set(offsets))
        for s in seen:
            assert (s.key, s.value) == (key_of(s.offset), value_of(s.offset))
        if mode == "retention":
            assert offsets == list(range(offsets[0], log.log_end_offset))
        else:
            assert_newest_kept(seen, acked)
        m.close()


def assert_newest_kept(seen: list[Seen], acked: list[int]) -> None:
    """Each key's newest acknowledged write, or a newer write of that key, is still there."""
    newest = {key_of(offset): offset for offset in acked}
    by_key = {s.key: s.offset for s in seen}
    for key, offset in newest.items():
        assert by_key.get(key, -1) >= offset, f"lost {key!r}@{offset}"
