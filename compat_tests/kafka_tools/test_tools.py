"""The runner itself: failures carry the tool's output, hangs time out, missing Java fails."""

from __future__ import annotations

import pytest

from compat_tests import maven
from compat_tests.kafka_tools.tools import KafkaTools, ToolFailed
from strom.broker.testing.embedded import BrokerProcess


def test_a_failing_tool_fails_with_its_output(
    kafka_tools: KafkaTools, shared_broker: BrokerProcess
) -> None:
    args = ("--bootstrap-server", shared_broker.bootstrap, "--describe", "--topic", "no-such")
    with pytest.raises(ToolFailed) as failed:
        kafka_tools.run("kafka-topics", *args)
    message = str(failed.value)
    assert "kafka-topics failed" in message
    assert "exit code 1" in message
    assert "Topic 'no-such' does not exist as expected" in message  # the tool's stdout
    assert "ERROR TopicCommand" in message  # its stderr, logged through our log4j2.xml

    result = kafka_tools.run("kafka-topics", *args, check=False)
    assert result.code == 1
    assert result.lines == [
        "Error while executing topic command : Topic 'no-such' does not exist as expected"
    ]


def test_a_hanging_tool_times_out(kafka_tools: KafkaTools, shared_broker: BrokerProcess) -> None:
    with pytest.raises(ToolFailed, match=r"kafka-console-consumer timed out after 3\.0s"):
        kafka_tools.run("kafka-console-consumer", "--bootstrap-server", shared_broker.bootstrap,
                        "--topic", "never-written", timeout=3.0)  # fmt: skip


def test_missing_java_fails_with_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(pytest.fail.Exception, match="no `java` on PATH: apt-get install"):
        KafkaTools.for_tests()
    with pytest.raises(maven.JvmUnavailable, match="openjdk-17-jdk-headless"):
        maven.require_java()
