"""Compatibility tests: every test runs stock clients against a real `strom serve` process.

The `strom_broker` fixture starts one child broker per test on a free port with its own data
directory; it starts in well under a second, so tests share no broker state.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.embedded import BrokerProcess

pytest_plugins = ["broker.testing"]


class CompatBroker(BrokerProcess):
    """BrokerProcess that closes each child's stderr pipe once it has been read to the end.

    BrokerProcess leaves the pipe open when its process ends, so the Popen object of a stopped
    (or restarted) broker is finalised with an open file: a ResourceWarning, which this suite
    turns into an error in whichever test happens to trigger garbage collection.
    """

    def _drain(self, process: subprocess.Popen[str], ready: threading.Event) -> None:
        try:
            super()._drain(process, ready)
        finally:
            if process.stderr is not None:
                process.stderr.close()


@pytest.fixture
def strom_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A `strom serve` child process on a free port with a temporary data directory.

    Overrides broker.testing's fixture of the same name only to use CompatBroker.
    """
    with CompatBroker(tmp_path / "data") as broker:
        yield broker
