"""Build hook: compile the produce path's record walk with mypyc when it can.

`strom/wire/records/walk.py` checks every record of every produced batch; compiled it costs
about a twentieth of the interpreted loop (docs/performance.md). Compilation is optional:
without mypyc or a C compiler, or with STROM_COMPILE=0, the same module runs as Python.
In a source checkout, `python setup.py build_ext --inplace` builds it next to the source
(tests/records/test_records_walk.py fails if that build is older than walk.py).
"""

from __future__ import annotations

import os
import sys

from setuptools import setup

COMPILED = ["strom/wire/records/walk.py"]


def _ext_modules() -> list[object]:
    if os.environ.get("STROM_COMPILE", "1") == "0":
        return []
    try:
        from mypyc.build import mypycify

        # The build environment holds mypy but not Strom's runtime dependencies: modules the
        # walk imports are read for their types only, and their own errors are not ours here.
        flags = ["--follow-imports=silent", "--ignore-missing-imports"]
        return list(mypycify([*flags, *COMPILED], opt_level="3"))
    except (Exception, SystemExit) as exc:  # no mypyc, no compiler: the pure-Python module is used
        print(f"strom: not compiling {COMPILED} ({exc}); it runs as Python", file=sys.stderr)
        return []


setup(ext_modules=_ext_modules())
