"""A CPU-time sampler for `strom serve` processes started by a benchmark (not part of Strom).

With this directory on PYTHONPATH and STROM_CPU_PROFILE=<dir> in the environment, every
`strom serve` process samples its own Python stack on `ITIMER_PROF`, which counts only the CPU
time the process uses: time descheduled on a loaded machine or waiting in epoll is never
sampled (py-spy's samples are wall-clock, and on a shared 2-core machine they mostly show a
process waiting for a core). The kernel delivers the timer at its tick, about every 4 ms of
CPU here. Each process writes `<dir>/<pid>.txt`, collapsed stacks ("frame;frame;... count"),
every 100 samples and at exit; `bench/paced_profile.py` reads them. Any other process ignores this file.
"""

from __future__ import annotations

import os
import sys

_DIR = os.environ.get("STROM_CPU_PROFILE")

if _DIR and "serve" in sys.argv:
    import atexit
    import collections
    import random
    import signal
    from types import FrameType

    _counts: collections.Counter[str] = collections.Counter()
    _path = os.path.join(_DIR, f"{os.getpid()}.txt")
    _taken = [0]

    def _dump() -> None:
        with open(_path + ".tmp", "w") as out:
            out.writelines(f"{stack} {n}\n" for stack, n in _counts.items())
        os.replace(_path + ".tmp", _path)

    def _sample(_signal: int, frame: FrameType | None) -> None:
        try:
            parts = []
            while frame is not None:
                code = frame.f_code
                where = code.co_filename.rsplit("/site-packages/", 1)[-1]
                parts.append(f"{code.co_qualname} ({where}:{frame.f_lineno})")
                frame = frame.f_back
            _counts[";".join(reversed(parts))] += 1
            _taken[0] += 1
            if _taken[0] % 100 == 0:
                _dump()
        except Exception:  # a sampler must never break the broker
            pass
        finally:
            signal.setitimer(signal.ITIMER_PROF, random.uniform(0.001, 0.010))

    def _stop() -> None:  # a timer left running would kill the exiting process (SIGPROF)
        signal.setitimer(signal.ITIMER_PROF, 0)
        _dump()

    atexit.register(_stop)
    signal.signal(signal.SIGPROF, _sample)
    signal.setitimer(signal.ITIMER_PROF, 0.002)
