"""The word count application, compiled once per test session (a missing JDK, Maven or jar
fails the tests with the command that installs it, never a skip)."""

from __future__ import annotations

import pytest

from compat_tests import maven
from compat_tests.streams.wordcount import build


@pytest.fixture(scope="session")
def wordcount_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        return build(tmp_path_factory.mktemp("wordcount"))
    except maven.JvmUnavailable as missing:
        pytest.fail(f"Kafka Streams unavailable: {missing}", pytrace=False)
