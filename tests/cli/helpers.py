"""Run `strom` client commands as a user does: a child process, its stdout, stderr and exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from strom.broker.testing.embedded import child_environment


def strom(
    bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strom", "--brokers", bootstrap, "--timeout", "15", *args],
        input=stdin, capture_output=True, text=True, timeout=timeout, env=child_environment(),
    )  # fmt: skip


def ok(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    done = strom(bootstrap, *args, stdin=stdin)
    assert done.returncode == 0, f"strom {' '.join(args)}: {done.returncode}\n{done.stderr}"
    return done.stdout


def ok_json(bootstrap: str, *args: str, stdin: str | None = None) -> Any:
    return json.loads(ok(bootstrap, "--format", "json", *args, stdin=stdin))
