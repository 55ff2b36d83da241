"""RemoteControllerChannel against a real node's CONTROLLER listener.

A second broker (id 2) registers with the combined node's controller through the channel, as a
broker-only node will, heartbeats until unfenced and shows up in Metadata. The channel moves on
from a controller that answers NOT_CONTROLLER or hangs up to the one the lookup names next, and
gives up with one line when no controller answers within the request's deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from strom.broker.drivers.controller_channel import (
    HEARTBEAT_VERSION,
    REGISTRATION_VERSION,
    RemoteControllerChannel,
)
from strom.broker.drivers.lifecycle import BrokerLifecycle, ControllerUnavailable
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.config import BrokerConfig, Listener, load_config
from strom.config.quorum import Address
from strom.coordinator.controller.state_machine import LATEST_METADATA_VERSION, MIN_METADATA_VERSION
from strom.wire.errors import ErrorCode
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.broker_registration import BrokerRegistrationRequest
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.broker.fake_controllers import dead_address, hang_up, not_controller

pytestmark = pytest.mark.trio


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
    }


def _controller(broker: EmbeddedBroker) -> Address:
    [listener] = broker.broker.controller_endpoints
    return Address(listener.host, listener.port)


def _config(tmp_path: Path, controller: Address, **extra: str) -> BrokerConfig:
    """Broker 2's configuration: broker-only, reaching node 1's controller listener."""
    return load_config(
        extra={
            "node.id": "2",
            "process.roles": "broker",
            "controller.quorum.voters": f"1@{controller}",
            "controller.listener.names": "CONTROLLER",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "two"),
            **extra,
        }
    )


def _lifecycle(
    broker: EmbeddedBroker, config: BrokerConfig, channel: RemoteControllerChannel
) -> BrokerLifecycle:
    state = broker.broker.state
    assert state is not None

    def registration(
        endpoints: Sequence[Listener], incarnation: uuid.UUID
    ) -> BrokerRegistrationRequest:
        return BrokerRegistrationRequest(
            broker_id=config.node_id,
            cluster_id=state.cluster_id,
            incarnation_id=incarnation,
            listeners=[
                BrokerRegistrationRequest.Listener(e.name, e.host, e.port, 0) for e in endpoints
            ],
            features=[
                BrokerRegistrationRequest.Feature(
                    "metadata.version", MIN_METADATA_VERSION, LATEST_METADATA_VERSION
                )
            ],
        )

    # broker 2 "replays" the metadata log as far as node 1 has it
    return BrokerLifecycle(
        config,
        channel,
        registration=registration,
        metadata_offset=lambda: state.image.provenance.offset,
    )


async def test_versions_are_the_latest_kafka_4_brokers_send() -> None:
    assert (REGISTRATION_VERSION, HEARTBEAT_VERSION) == (4, 1)


async def test_a_remote_broker_registers_through_the_channel_and_is_listed(
    broker: EmbeddedBroker, client: KafkaClient, tmp_path: Path
) -> None:
    controller = _controller(broker)
    config = _config(tmp_path, controller)
    channel = RemoteControllerChannel.for_broker(config, lambda: controller)
    try:
        lifecycle = _lifecycle(broker, config, channel)
        endpoint = Listener("PLAINTEXT", "127.0.0.1", 19092)
        epoch = await lifecycle.register([endpoint])
        assert epoch >= 0
        assert not lifecycle.fenced
        beat = await lifecycle.heartbeat()
        assert (beat.error_code, beat.is_fenced) == (ErrorCode.NONE, False)
    finally:
        await channel.aclose()
    metadata = await client.request(MetadataRequest(topics=None), 12, MetadataResponse)
    brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    assert brokers[2] == ("127.0.0.1", 19092)
    assert set(brokers) == {1, 2}


async def test_not_controller_and_hang_ups_move_on_to_the_new_active_controller(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    real = _controller(broker)
    # a backoff far longer than the test may take: only the change event can end it
    config = _config(tmp_path, real, **{"controller.quorum.retry.backoff.ms": "600000"})
    async with not_controller() as stale, hang_up() as gone:
        order = [stale, gone]
        changed = trio.Event()

        def lookup() -> Address:
            while order and order[0].requests:
                order.pop(0)
            return order[0].address if order else real

        def changes() -> trio.Event:
            nonlocal changed
            changed = trio.Event()
            for fake in order:  # the next answer from a stale controller is a "change"
                fake.answered = changed
            return changed

        channel = RemoteControllerChannel.for_broker(
            config, lookup, changes=changes, timeout_ms=30_000
        )
        try:
            with trio.fail_after(20):
                lifecycle = _lifecycle(broker, config, channel)
                await lifecycle.register([Listener("PLAINTEXT", "127.0.0.1", 19093)])
        finally:
            await channel.aclose()
        assert (stale.requests, gone.requests) == (1, 1)
        assert not lifecycle.fenced


async def test_no_answer_within_the_deadline_is_one_line(tmp_path: Path) -> None:
    dead = dead_address()
    config = _config(tmp_path, dead)
    channel = RemoteControllerChannel.for_broker(config, lambda: dead, timeout_ms=200)
    request = BrokerHeartbeatRequest(broker_id=2, broker_epoch=5)
    with pytest.raises(ControllerUnavailable) as caught:
        await channel.heartbeat(request)
    await channel.aclose()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("BrokerHeartbeatRequest got no answer from an active controller "
                              "within 200 ms; last: ")  # fmt: skip
    assert str(dead) in message


async def test_hang_ups_are_retried_until_the_deadline(tmp_path: Path) -> None:
    async with hang_up() as gone:
        config = _config(tmp_path, gone.address)
        channel = RemoteControllerChannel.for_broker(config, lambda: gone.address, timeout_ms=300)
        with pytest.raises(ControllerUnavailable, match="closed the connection"):
            await channel.heartbeat(BrokerHeartbeatRequest(broker_id=2, broker_epoch=5))
        await channel.aclose()
    assert gone.requests >= 2


async def test_no_known_controller_fails_registration_with_the_cause(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        dead_address(),
        **{"initial.broker.registration.timeout.ms": "300", "broker.session.timeout.ms": "200"},
    )
    channel = RemoteControllerChannel.for_broker(config, lambda: None)
    lifecycle = BrokerLifecycle(
        config,
        channel,
        registration=lambda _e, _i: BrokerRegistrationRequest(broker_id=2),
        metadata_offset=lambda: 0,
    )
    from strom.broker.drivers.lifecycle import RegistrationError

    with pytest.raises(RegistrationError) as caught:
        await lifecycle.register([Listener("PLAINTEXT", "127.0.0.1", 19094)])
    await channel.aclose()
    assert "no active controller is known" in str(caught.value)
    assert "\n" not in str(caught.value)
