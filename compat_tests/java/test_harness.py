"""The harness itself: a failing scenario is a non-zero exit with a clear message."""

from __future__ import annotations

import pytest

from compat_tests.java.harness import HarnessFailed, JavaHarness
from strom.broker.testing.embedded import BrokerProcess


def test_unknown_scenario_fails_loudly(
    java_harness: JavaHarness, strom_broker: BrokerProcess
) -> None:
    with pytest.raises(HarnessFailed, match="unknown scenario no-such-scenario") as failed:
        java_harness.run(strom_broker, "no-such-scenario")
    assert "exit status 1" in str(failed.value)
    assert "HARNESS FAILED" in str(failed.value)


def test_unknown_argument_fails_loudly(
    java_harness: JavaHarness, strom_broker: BrokerProcess
) -> None:
    with pytest.raises(HarnessFailed, match=r"unknown arguments: \[colour\]"):
        java_harness.run(strom_broker, "cluster", colour="blue")
