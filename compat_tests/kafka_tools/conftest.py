"""The Kafka tools' jars, resolved once per test session.

A missing `java`/`mvn` or an artifact Maven cannot fetch fails every test here with what to
install (never a skip: CI installs them).
"""

from __future__ import annotations

import pytest

from compat_tests.kafka_tools.tools import KafkaTools


@pytest.fixture(scope="session")
def kafka_tools() -> KafkaTools:
    return KafkaTools.for_tests()
