"""`child_environment()`: what a `strom` child of the test harness runs with."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.testing.embedded import bytecode_cache, child_environment


def test_children_cache_their_bytecode_where_the_checkout_writes_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    env = child_environment()
    assert env["PYTHONDONTWRITEBYTECODE"] == ""
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "strom" / "bytecode")
    assert bytecode_cache() == tmp_path / "strom" / "bytecode"


def test_a_users_bytecode_settings_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    assert "PYTHONPYCACHEPREFIX" not in child_environment()
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/somewhere/else")
    env = child_environment()
    assert env["PYTHONPYCACHEPREFIX"] == "/somewhere/else"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
