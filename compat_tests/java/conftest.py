"""The compiled Java harness, once per test session and client version.

`java_harness` is parametrized over `harness.CLIENTS` (kafka-clients 3.9 and 4.x), so every
Java test runs against both. A missing JDK or missing client jars fail the tests, with the
command that installs what is missing (never a skip).
"""

from __future__ import annotations

import pytest

from compat_tests.java.harness import CLIENTS, JavaHarness, JavaUnavailable


@pytest.fixture(scope="session", params=CLIENTS, ids=[f"kafka-clients-{c}" for c in CLIENTS])
def java_harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> JavaHarness:
    client: str = request.param
    try:
        return JavaHarness.build(tmp_path_factory.mktemp(f"java-harness-{client}"), client)
    except JavaUnavailable as missing:
        pytest.fail(f"Java client harness ({client}) unavailable: {missing}", pytrace=False)
