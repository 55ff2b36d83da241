"""One Spark session (local[2], Spark's own Kafka connector) for a test module.

Starting Spark costs 20-30 s, so a module's tests share one session. Missing Java, PySpark or
the connector fails the tests with what to install; nothing here is ever skipped.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    try:
        from examples.pageviews.session import SparkUnavailable, start_session
    except ModuleNotFoundError as exc:
        pytest.fail(f"{exc.name} is not installed: pip install -e '.[spark]'", pytrace=False)
    try:
        session = start_session("compat-tests-spark")
    except SparkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    yield session
    session.stop()
    # The JVM outlives stop(): its cached Kafka producers would log reconnect warnings against the
    # stopped broker until Python exits, after pytest's summary. End the JVM with the session.
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is not None:
        jvm: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
        gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
        if jvm is not None:
            if jvm.stdin is not None:
                jvm.stdin.close()  # the JVM exits when its stdin closes, as PySpark arranges
            jvm.wait(timeout=60)
