"""The compiled Java harness, once per test session.

A missing JDK or missing client jars fail every Java test under CI (CI is set) and skip them
elsewhere, with the command that installs what is missing.
"""

from __future__ import annotations

import os

import pytest

from compat_tests.java.harness import JavaHarness, JavaUnavailable


@pytest.fixture(scope="session")
def java_harness(tmp_path_factory: pytest.TempPathFactory) -> JavaHarness:
    try:
        return JavaHarness.build(tmp_path_factory.mktemp("java-harness"))
    except JavaUnavailable as missing:
        message = f"Java client harness unavailable: {missing}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
