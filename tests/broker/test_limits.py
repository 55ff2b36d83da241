"""`strom serve` raises its open-files soft limit to the hard limit (one fd per partition)."""

from __future__ import annotations

import resource
import subprocess
import sys


def lower_soft_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))


def test_soft_limit_is_raised_to_the_hard_limit_and_logged() -> None:
    code = (
        "import logging, resource; logging.basicConfig(level=logging.INFO);"
        "from strom.broker.process.limits import raise_open_files; n = raise_open_files();"
        "print(n, *resource.getrlimit(resource.RLIMIT_NOFILE))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=lower_soft_limit,
    )
    assert result.returncode == 0, result.stderr
    now, soft, hard = (int(x) for x in result.stdout.split())
    assert now == soft == hard or hard == resource.RLIM_INFINITY
    if hard > 256:
        assert "open files limit raised from 256" in result.stderr
