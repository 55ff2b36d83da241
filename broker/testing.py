"""pytest fixtures for tests that need a real broker (`pytest_plugins = ["broker.testing"]`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.embedded import BrokerProcess


@pytest.fixture
def strom_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A `strom serve` child process on a free port with a temporary data directory."""
    with BrokerProcess(tmp_path / "data") as broker:
        yield broker
