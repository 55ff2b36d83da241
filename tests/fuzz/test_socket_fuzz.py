"""The socket fuzzer, short: a real broker process survives mutated frames of every API.

`STROM_FUZZ_FRAMES` sets the number of frames (default 1,000 for CI) and
`STROM_FUZZ_SEED` replays a run; the long mode is `python -m tests.fuzz.socket_fuzz
--frames 1000000`. See docs/fuzzing.md.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.fuzz.socket_fuzz import FRAMES_ENV, SEED_ENV, failures, run

CI_FRAMES = 1000


def test_broker_survives_fuzzed_frames(tmp_path: Path) -> None:
    frames = int(os.environ.get(FRAMES_ENV, CI_FRAMES))
    seed = int(os.environ.get(SEED_ENV, random.randrange(2**32)))
    print(f"socket fuzz seed={seed} (replay: {SEED_ENV}={seed})")
    report = run(frames, seed, connections=4, data_dir=tmp_path / "data")
    print(report.summary())
    problems = failures(report)
    assert not problems, f"{report.summary()}\n" + "\n".join(problems[:20])
    assert report.frames == frames
    assert report.responses > 0
    assert report.control_records > 0
