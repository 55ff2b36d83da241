"""Real kill -9 while appending, rolling and flushing: indexes that lag their logs recover.

The active segment's index entries live in memory until a roll, flush or clean
shutdown writes them, so a killed process leaves index files shorter than their
logs. A child process appends (small segments, an index entry per batch or
so), flushing now and then, until the parent SIGKILLs it at a random point;
after each kill the log must hold every acknowledged record, find each one by
offset and by timestamp, and carry exactly the indexes a full rebuild gives.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from strom.storage import LogConfig, PartitionLog
from tests.log.helpers import T0, Clock, batch, get_log, manager, read_everything

ROOT = Path(__file__).resolve().parents[2]
CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=150)


def value_of(offset: int) -> bytes:
    return b"value-%d-" % offset + b"x" * (offset * 7 % 120)


def child(root: str) -> None:
    """Append one record per batch forever, flushing every 25; report each acknowledgement."""
    clock = Clock()
    m = manager([Path(root)], clock, CONFIG)
    log = m.create("t", 0, CONFIG)
    while True:
        offset = log.log_end_offset
        log.append(batch([value_of(offset)], ts=T0 + offset), 0, clock())
        print(f"acked {offset}", flush=True)
        if offset % 25 == 0:
            log.flush()


def run_until_killed(root: Path, acks: int) -> int:
    """Start the child, SIGKILL it after `acks` acknowledgements; the last acked offset."""
    code = f"from tests.log.test_index_kill import child; child({str(root)!r})"
    process = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None
    last = -1
    try:
        for line in process.stdout:
            last = int(line.split()[1])
            acks -= 1
            if acks == 0:
                process.send_signal(signal.SIGKILL)  # it goes on appending until the signal lands
                break
        else:
            assert process.stderr is not None
            raise AssertionError(f"child ended on its own: {process.stderr.read()!r}")
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        assert process.stderr is not None
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    return last


def index_sizes(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (root / "t-0").glob("*index")}


def index_entries(log: PartitionLog) -> list[list[tuple[int, int]]]:
    out = []
    for s in log._segments:
        out.append([s.offset_index.entry(n) for n in range(s.offset_index.entries)])
        out.append([s.time_index.entry(n) for n in range(s.time_index.entries)])
    return out


def test_kill_9_leaves_indexes_that_recovery_completes(tmp_path: Path) -> None:
    data, rebuilt = tmp_path / "data", tmp_path / "rebuilt"
    rng = random.Random(7)
    lagged = 0
    for _ in range(4):
        last = run_until_killed(data, rng.randint(40, 400))
        left = index_sizes(data)
        m = manager([data], Clock(), CONFIG)
        lagged += any(size < index_sizes(data)[name] for name, size in left.items())
        log = get_log(m)
        assert log.log_end_offset > last  # kill -9 keeps the page cache: nothing acked is lost
        records = read_everything(log, 0)
        assert records == [(o, value_of(o)) for o in range(log.log_end_offset)]
        for offset in rng.sample(range(log.log_end_offset), 30):
            assert log.offset_for_timestamp(T0 + offset) == (offset, T0 + offset, 0)
        shutil.rmtree(rebuilt, ignore_errors=True)
        shutil.copytree(data, rebuilt)
        for path in (rebuilt / "t-0").glob("*index"):
            path.unlink()
        fresh = manager([rebuilt], Clock(), CONFIG)
        assert index_entries(get_log(fresh)) == index_entries(log)
        fresh.close()
        m.close()  # the next child opens cleanly: its tail scan must find the right end
    assert lagged  # the kills did leave indexes behind their logs
