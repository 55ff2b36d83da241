"""Admin requests forwarded to the active controller, against a real node's CONTROLLER listener.

`ControllerForwarder` alone: CreateTopics and DeleteTopics forwarded to node B's controller
listener change B's metadata; a controller answering NOT_CONTROLLER is left for the next one the
lookup names; an unreachable controller fails within the deadline. Then the handlers: node A,
made to believe another node is the active controller, forwards every forwarded API its clients
send to B, answers REQUEST_TIMED_OUT per entry when no controller answers, and NOT_CONTROLLER on
its own controller listener.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest
import trio

from strom.broker.drivers.controller_forwarder import ControllerForwarder
from strom.broker.drivers.lifecycle import ControllerUnavailable
from strom.broker.drivers.quorum_controller import QuorumController
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.config.quorum import Address
from strom.config.values import ConfigResource
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from strom.wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from tests.broker.fake_controllers import dead_address, not_controller
from tests.broker.test_create_topics import topic

pytestmark = pytest.mark.trio

WITH_CONTROLLER_LISTENER = {
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    "controller.listener.names": "CONTROLLER",
}


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return dict(WITH_CONTROLLER_LISTENER)


def _controller(broker: EmbeddedBroker) -> Address:
    [listener] = broker.broker.controller_endpoints
    return Address(listener.host, listener.port)


def _driver(broker: EmbeddedBroker) -> QuorumController:
    state = broker.broker.state
    assert state is not None
    controller = state.controller
    assert isinstance(controller, QuorumController)
    return controller


def _create(*names: str, timeout_ms: int = 30_000) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[topic(n, 2) for n in names], timeout_ms=timeout_ms)


@pytest.fixture
async def forwarder(broker: EmbeddedBroker) -> AsyncIterator[ControllerForwarder]:
    address = _controller(broker)
    forwarder = ControllerForwarder(broker.broker.config, lambda: address)
    yield forwarder
    await forwarder.aclose()


async def test_forwarded_create_and_delete_topics_change_the_controller(
    broker: EmbeddedBroker, forwarder: ControllerForwarder
) -> None:
    created = await forwarder.forward(_create("forwarded"), 7, CreateTopicsResponse, 30_000)
    [result] = created.topics
    assert (result.name, result.error_code, result.num_partitions) == ("forwarded", 0, 2)
    made = _driver(broker).image.topic("forwarded")
    assert made is not None
    assert made.topic_id == result.topic_id

    delete = DeleteTopicsRequest(topic_names=["forwarded"], timeout_ms=30_000)
    deleted = await forwarder.forward(delete, 5, DeleteTopicsResponse, 30_000)
    assert [(r.name, r.error_code) for r in deleted.responses] == [("forwarded", 0)]
    assert _driver(broker).image.topic("forwarded") is None


async def test_the_controller_answers_at_the_clients_version(
    forwarder: ControllerForwarder,
) -> None:
    created = await forwarder.forward(_create("old"), 4, CreateTopicsResponse, 30_000)
    [result] = created.topics
    assert (result.name, result.error_code) == ("old", 0)
    again = await forwarder.forward(_create("old"), 4, CreateTopicsResponse, 30_000)
    assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


async def test_not_controller_is_retried_against_the_new_active_controller(
    broker: EmbeddedBroker,
) -> None:
    real = _controller(broker)
    async with not_controller() as stale:
        forwarder = ControllerForwarder(
            broker.broker.config, lambda: real if stale.requests else stale.address
        )
        try:
            response = await forwarder.forward(_create("moved"), 7, CreateTopicsResponse, 30_000)
        finally:
            await forwarder.aclose()
    assert stale.requests == 1
    assert [(t.name, t.error_code) for t in response.topics] == [("moved", 0)]
    assert _driver(broker).image.topic("moved") is not None


async def test_an_unreachable_controller_fails_within_the_clients_timeout(
    broker: EmbeddedBroker,
) -> None:
    dead = dead_address()
    forwarder = ControllerForwarder(broker.broker.config, lambda: dead)
    with pytest.raises(ControllerUnavailable, match=f"within 250 ms; last: {dead}"):
        await forwarder.forward(_create("nowhere", timeout_ms=250), 7, CreateTopicsResponse, 250)
    await forwarder.aclose()
    nobody = ControllerForwarder(broker.broker.config, lambda: None, retry_timeout_ms=100)
    with pytest.raises(ControllerUnavailable, match="no active controller is known"):
        await nobody.forward(_create("nowhere"), 7, CreateTopicsResponse, 30_000)
    await nobody.aclose()


class NotActive(QuorumController):
    """A's controller, believing another node (9) is the active controller at `target`."""

    target: Address | None = None

    @property
    def is_active(self) -> bool:
        return False

    @property
    def active_controller_id(self) -> int | None:
        return None if self.target is None else 9

    def controller_address(self, node_id: int) -> Address | None:
        return self.target if node_id == 9 else None


@pytest.fixture
async def follower(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[EmbeddedBroker, NotActive]]:
    async with open_broker(tmp_path / "a", WITH_CONTROLLER_LISTENER) as a:
        driver = _driver(a)
        monkeypatch.setattr(driver, "__class__", NotActive)
        yield a, cast(NotActive, driver)


async def test_handlers_forward_when_this_node_is_not_the_active_controller(
    broker: EmbeddedBroker, follower: tuple[EmbeddedBroker, NotActive]
) -> None:
    a, driver = follower
    driver.target = _controller(broker)
    b = _driver(broker)
    client = await KafkaClient.connect(a.bootstrap)
    try:
        created = await client.request(_create("via-a"), 7, CreateTopicsResponse)
        assert [(t.name, t.error_code) for t in created.topics] == [("via-a", 0)]
        made = b.image.topic("via-a")
        assert made is not None
        assert made.num_partitions == 2
        assert driver.image.topic("via-a") is None  # A's own (inactive) controller: untouched

        grow = CreatePartitionsRequest(
            topics=[CreatePartitionsRequest.CreatePartitionsTopic("via-a", 3, None)],
            timeout_ms=30_000,
        )
        grown = await client.request(grow, 3, CreatePartitionsResponse)
        assert [(r.name, r.error_code) for r in grown.results] == [("via-a", 0)]
        made = b.image.topic("via-a")
        assert made is not None
        assert made.num_partitions == 3

        incremental = IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    ConfigResource.TOPIC,
                    "via-a",
                    [IncrementalAlterConfigsRequest.AlterableConfig("retention.ms", 0, "1000")],
                )
            ]
        )
        altered = await client.request(incremental, 1, IncrementalAlterConfigsResponse)
        assert [r.error_code for r in altered.responses] == [0]
        assert b.image.topic_config_overrides("via-a") == {"retention.ms": "1000"}

        legacy = AlterConfigsRequest(
            resources=[
                AlterConfigsRequest.AlterConfigsResource(
                    ConfigResource.TOPIC,
                    "via-a",
                    [AlterConfigsRequest.AlterableConfig("cleanup.policy", "compact")],
                )
            ]
        )
        replaced = await client.request(legacy, 2, AlterConfigsResponse)
        assert [r.error_code for r in replaced.responses] == [0]
        assert b.image.topic_config_overrides("via-a") == {"cleanup.policy": "compact"}

        delete = DeleteTopicsRequest(topic_names=["via-a"], timeout_ms=30_000)
        deleted = await client.request(delete, 5, DeleteTopicsResponse)
        assert [(r.name, r.error_code) for r in deleted.responses] == [("via-a", 0)]
        assert b.image.topic("via-a") is None
    finally:
        await client.aclose()


async def test_no_active_controller_times_every_entry_out(
    follower: tuple[EmbeddedBroker, NotActive],
) -> None:
    a, _driver_a = follower  # target None: no controller is known
    client = await KafkaClient.connect(a.bootstrap)
    try:
        with trio.fail_after(10):
            response = await client.request(
                _create("x", "y", timeout_ms=200), 7, CreateTopicsResponse
            )
        assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
            ("x", ErrorCode.REQUEST_TIMED_OUT, None),
            ("y", ErrorCode.REQUEST_TIMED_OUT, None),
        ]
        delete = DeleteTopicsRequest(topic_names=["x"], timeout_ms=200)
        deleted = await client.request(delete, 5, DeleteTopicsResponse)
        assert [(r.name, r.error_code) for r in deleted.responses] == [
            ("x", ErrorCode.REQUEST_TIMED_OUT)
        ]
    finally:
        await client.aclose()


async def test_a_controller_that_is_not_active_answers_not_controller(
    follower: tuple[EmbeddedBroker, NotActive], broker: EmbeddedBroker
) -> None:
    a, driver = follower
    driver.target = _controller(broker)  # even when it knows the active one
    own = _controller(a)
    client = await KafkaClient.connect(str(own))
    try:
        response = await client.request(_create("here"), 7, CreateTopicsResponse)
    finally:
        await client.aclose()
    assert [(t.name, t.error_code) for t in response.topics] == [("here", ErrorCode.NOT_CONTROLLER)]
    assert _driver(broker).image.topic("here") is None
