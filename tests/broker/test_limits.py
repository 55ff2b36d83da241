"""`strom serve` raises its open-files soft limit to the hard limit (one fd per partition)."""

from __future__ import annotations

import logging
import resource
import subprocess
import sys

import pytest

from strom.broker.process import limits

_OURS = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
HARD = 1024 if _OURS == resource.RLIM_INFINITY else min(1024, _OURS)
SOFT = HARD // 4
"""A finite hard limit the child can always set (lowering is never refused), and a soft one below."""


def finite_limits() -> None:
    """In the child: a soft limit under a finite hard limit, whatever ours are."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, HARD))


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
        preexec_fn=finite_limits,
    )
    assert result.returncode == 0, result.stderr
    assert [int(x) for x in result.stdout.split()] == [HARD, HARD, HARD]
    assert f"open files limit raised from {SOFT} to {HARD}" in result.stderr


def test_unlimited_hard_limit_means_the_kernel_maximum(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """setrlimit refuses a soft limit of "unlimited" for NOFILE; fs.nr_open's default is asked."""
    calls: list[tuple[int, tuple[int, int]]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda _: (SOFT, resource.RLIM_INFINITY))
    monkeypatch.setattr(resource, "setrlimit", lambda r, v: calls.append((r, v)))
    with caplog.at_level(logging.INFO, "strom.limits"):
        assert limits.raise_open_files() == limits.NR_OPEN_DEFAULT
    assert calls == [(resource.RLIMIT_NOFILE, (limits.NR_OPEN_DEFAULT, resource.RLIM_INFINITY))]
    assert f"raised from {SOFT} to {limits.NR_OPEN_DEFAULT}" in caplog.text


def test_a_refused_raise_keeps_the_soft_limit_and_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(resource_id: int, value: tuple[int, int]) -> None:
        raise ValueError("not allowed to raise maximum limit")

    monkeypatch.setattr(resource, "getrlimit", lambda _: (SOFT, HARD))
    monkeypatch.setattr(resource, "setrlimit", refuse)
    assert limits.raise_open_files() == SOFT
    assert f"open files limit stays at {SOFT}" in caplog.text
