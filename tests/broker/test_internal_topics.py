"""Topics the broker creates itself: auto-created and internal ones share one controller path."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.drivers.topics import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    auto_create_topics,
    create_internal_topic,
    internal_topic,
)
from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.config import BrokerConfig
from strom.wire.errors import ErrorCode
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse


def state_of(broker: EmbeddedBroker) -> BrokerState:
    state = broker.broker.state
    assert state is not None
    return state


@pytest.mark.trio
async def test_transaction_coordinator_creates_its_topic_from_the_transaction_settings(
    tmp_path: Path,
) -> None:
    overrides = {
        "transaction.state.log.num.partitions": "3",
        "transaction.state.log.segment.bytes": "2000000",
    }
    async with open_broker(tmp_path / "data", overrides) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            response = await client.request(
                FindCoordinatorRequest(key="tx", key_type=1), 3, FindCoordinatorResponse
            )
        finally:
            await client.aclose()
        assert response.error_code == ErrorCode.NONE
        image = state_of(broker).image
        topic = image.topic(TRANSACTION_STATE)
        assert topic is not None
        assert len(topic.partitions) == 3
        assert image.topic_config_overrides(TRANSACTION_STATE) == {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": "1",
            "segment.bytes": "2000000",
        }


@pytest.mark.trio
async def test_an_internal_topic_the_controller_refuses_is_coordinator_not_available(
    tmp_path: Path,
) -> None:
    """Three replicas on a one-node cluster: clients are told to retry, nothing is created."""
    overrides = {"offsets.topic.replication.factor": "3"}
    async with open_broker(tmp_path / "data", overrides) as broker:
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            response = await client.request(
                FindCoordinatorRequest(key="g"), 3, FindCoordinatorResponse
            )
        finally:
            await client.aclose()
        assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert state_of(broker).image.topic(CONSUMER_OFFSETS) is None


@pytest.mark.trio
async def test_existing_topics_count_as_created_on_both_paths(broker: EmbeddedBroker) -> None:
    state = state_of(broker)
    assert await auto_create_topics(state.controller, ["a", "a", "b"]) == {
        "a": ErrorCode.NONE,
        "b": ErrorCode.NONE,
    }
    assert await auto_create_topics(state.controller, ["a", "bad name!"]) == {
        "a": ErrorCode.NONE,
        "bad name!": ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
    offsets = internal_topic(state.config, CONSUMER_OFFSETS)
    assert await create_internal_topic(state.controller, offsets) == ErrorCode.NONE
    assert await create_internal_topic(state.controller, offsets) == ErrorCode.NONE
    assert len(state.image.topic_names()) == 3


def test_only_internal_topics_have_an_internal_spec() -> None:
    offsets = internal_topic(BrokerConfig(), CONSUMER_OFFSETS)
    assert (offsets.partitions, offsets.replication) == (50, 1)
    assert offsets.configs["cleanup.policy"] == "compact"
    with pytest.raises(ValueError, match="not an internal topic"):
        internal_topic(BrokerConfig(), "orders")
