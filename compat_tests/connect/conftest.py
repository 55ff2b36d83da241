"""One Kafka Connect distributed worker per test module, on the module's Strom broker.

A missing `java`/`mvn` or an artifact Maven cannot fetch fails the tests with what to install.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests import maven
from compat_tests.connect.worker import ConnectWorker, Topics, connect_classpath
from compat_tests.helpers import topic_name
from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.embedded import BrokerProcess


@pytest.fixture(scope="session")
def connect_jars() -> tuple[str, list[Path]]:
    try:
        return maven.require_java(), connect_classpath()
    except maven.JvmUnavailable as missing:
        pytest.fail(f"Kafka Connect unavailable: {missing}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_tools() -> KafkaTools:
    return KafkaTools.for_tests()


@pytest.fixture(scope="module")
def connect_worker(
    _module_broker: BrokerProcess,
    connect_jars: tuple[str, list[Path]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConnectWorker]:
    java, classpath = connect_jars
    topics = Topics(
        config=topic_name("connect-configs"),
        offsets=topic_name("connect-offsets"),
        status=topic_name("connect-status"),
    )
    worker = ConnectWorker(
        java, classpath, _module_broker.bootstrap, topic_name("connect-cluster"), topics,
        tmp_path_factory.mktemp("connect"),
    )  # fmt: skip
    try:
        worker.start()
        yield worker
    finally:
        if worker.process is not None and worker.process.poll() is None:
            worker.stop()
