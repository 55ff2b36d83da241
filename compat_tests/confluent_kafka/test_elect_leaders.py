"""librdkafka's Admin elect_leaders (ElectLeaders, API 43) against a single node."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import topic_name
from strom.broker.testing.embedded import BrokerProcess


@pytest.mark.parametrize("election", [ElectionType.PREFERRED, ElectionType.UNCLEAN])
def test_elect_leaders_not_needed_on_a_single_node(
    shared_broker: BrokerProcess, election: ElectionType
) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    topic = topic_name("elect")
    ck.create_topic(admin, topic, 2)
    future = admin.elect_leaders(election, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    results = future.result(timeout=ck.TIMEOUT)
    assert sorted((tp.topic, tp.partition) for tp in results) == [(topic, 0), (topic, 1)]
    for tp in results:
        assert tp.error is not None
        assert tp.error.code() == KafkaError.ELECTION_NOT_NEEDED


def test_elect_leaders_for_an_unknown_topic(shared_broker: BrokerProcess) -> None:
    admin = ck.admin(shared_broker.bootstrap)
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("no-such-topic", 0)])
    [tp] = future.result(timeout=ck.TIMEOUT)
    assert tp.error is not None
    assert tp.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
