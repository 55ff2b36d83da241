"""Compatibility tests: every test runs stock clients against a real `strom serve` process.

Two fixtures give a test its broker:

- `strom_broker`: a child broker of its own, on a free port with its own data directory, for
  tests that stop, kill or restart it (durability) or depend on broker-wide state.
- `shared_broker`: one child broker per test module, shared by its tests, which keep apart by
  using fresh topic names (`helpers.topic_name`). A broker start costs about a second, so this
  keeps the whole compat suite within its time budget. A test during which the shared broker
  exits fails, with the broker's last output, and the next test gets a restarted one.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from strom.broker.testing.embedded import BrokerProcess


@pytest.fixture(scope="module")
def _module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("strom") / "data")
    with broker:
        yield broker


@pytest.fixture
def shared_broker(_module_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    """This module's broker; fails the test during which it exits."""
    process = _module_broker.process
    if process is None or process.poll() is not None:
        _module_broker.start()
    yield _module_broker
    process = _module_broker.process
    assert process is not None
    code = process.poll()
    if code is not None:
        tail = "\n".join(list(_module_broker.output)[-40:])
        pytest.fail(f"strom serve exited with code {code} during this test; its output:\n{tail}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries its broker's last output: the only trace CI keeps."""
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name in ("strom_broker", "shared_broker"):
            broker = funcargs.get(name)
            if isinstance(broker, BrokerProcess):
                tail = "\n".join(list(broker.output)[-200:])
                report.sections.append((f"strom serve output ({name})", tail))
    return report
