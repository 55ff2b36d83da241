"""Strom's pytest plugin: a `strom_broker` fixture for any project's tests.

Installing Strom registers this module under the `pytest11` entry point, so a user's test needs
no set-up:

    def test_round_trip(strom_broker):
        producer = Producer({"bootstrap.servers": strom_broker.bootstrap})
        ...
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.broker.testing.embedded import BrokerProcess


@pytest.fixture
def strom_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A `strom serve` child process on a free port with a temporary data directory."""
    with BrokerProcess(tmp_path / "data") as broker:
        yield broker
