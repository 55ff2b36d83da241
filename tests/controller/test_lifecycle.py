"""`BrokerLifecycle` against a scripted controller: retries, re-registration, refusals."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TypeVar

import pytest
import trio
import trio.testing

from strom.broker.drivers.lifecycle import (
    BrokerLifecycle,
    ControllerUnavailable,
    RegistrationError,
)
from strom.config import BrokerConfig, Listener
from strom.storage.meta_properties import kafka_uuid_string, new_cluster_id
from strom.wire.errors import ErrorCode
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from strom.wire.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)

CONFIG = BrokerConfig.from_properties(
    {"broker.heartbeat.interval.ms": "1", "controller.quorum.retry.backoff.ms": "1",
     "initial.broker.registration.timeout.ms": "2000"}
)  # fmt: skip

R = TypeVar("R")


class ScriptedController:
    """Answers registrations and heartbeats from scripts; records what it was sent."""

    def __init__(
        self,
        registrations: list[BrokerRegistrationResponse | Exception],
        beats: list[BrokerHeartbeatResponse | Exception],
    ) -> None:
        self.registrations = registrations
        self.beats = beats
        self.sent: list[object] = []

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        self.sent.append(request)
        return _answer(self.registrations)

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        self.sent.append(request)
        return _answer(self.beats)


class ScriptEnded(Exception):
    pass


def _answer(script: list[R | Exception]) -> R:
    if not script:
        raise ScriptEnded
    answer = script.pop(0)
    if isinstance(answer, Exception):
        raise answer
    return answer


def _lifecycle(channel: ScriptedController) -> BrokerLifecycle:
    def registration(
        endpoints: Sequence[Listener], incarnation: uuid.UUID
    ) -> BrokerRegistrationRequest:
        return BrokerRegistrationRequest(broker_id=1, incarnation_id=incarnation)

    return BrokerLifecycle(
        CONFIG, channel, registration=registration, metadata_offset=lambda: 42,
        incarnation_id=uuid.UUID(int=5),
    )  # fmt: skip


def _beat(fenced: bool, error: ErrorCode = ErrorCode.NONE) -> BrokerHeartbeatResponse:
    return BrokerHeartbeatResponse(error_code=error, is_fenced=fenced, is_caught_up=not fenced)


def test_registers_then_heartbeats_until_unfenced() -> None:
    channel = ScriptedController(
        [BrokerRegistrationResponse(broker_epoch=7)], [_beat(True), _beat(True), _beat(False)]
    )
    lifecycle = _lifecycle(channel)
    assert trio.run(lifecycle.register, [Listener("PLAINTEXT", "h", 1)]) == 7
    assert not lifecycle.fenced
    beats = [m for m in channel.sent if isinstance(m, BrokerHeartbeatRequest)]
    assert [(b.broker_epoch, b.current_metadata_offset) for b in beats] == [(7, 42)] * 3
    assert trio.run(lifecycle.register, [Listener("PLAINTEXT", "h", 1)]) == 7  # no-op
    assert len(channel.sent) == 4


def test_registration_sends_the_previous_broker_epoch() -> None:
    channel = ScriptedController([BrokerRegistrationResponse(broker_epoch=9)], [_beat(False)])
    lifecycle = _lifecycle(channel)
    assert lifecycle.previous_broker_epoch == -1
    lifecycle.previous_broker_epoch = 3  # what the clean-shutdown markers named
    trio.run(lifecycle.register, [Listener("PLAINTEXT", "h", 1)])
    [request] = [m for m in channel.sent if isinstance(m, BrokerRegistrationRequest)]
    assert request.previous_broker_epoch == 3


def test_duplicate_registration_is_retried_and_stale_epoch_registers_again() -> None:
    channel = ScriptedController(
        [
            BrokerRegistrationResponse(error_code=ErrorCode.DUPLICATE_BROKER_REGISTRATION),
            BrokerRegistrationResponse(broker_epoch=3),
            BrokerRegistrationResponse(broker_epoch=9),
        ],
        [_beat(True, ErrorCode.STALE_BROKER_EPOCH), _beat(False)],
    )
    lifecycle = _lifecycle(channel)
    assert trio.run(lifecycle.register, []) == 9
    registrations = [m for m in channel.sent if isinstance(m, BrokerRegistrationRequest)]
    assert {r.incarnation_id for r in registrations} == {uuid.UUID(int=5)}  # one incarnation


def test_a_refusal_is_a_registration_error() -> None:
    channel = ScriptedController(
        [BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)], []
    )
    with pytest.raises(RegistrationError, match="INCONSISTENT_CLUSTER_ID"):
        trio.run(_lifecycle(channel).register, [])


def test_a_controller_that_cannot_act_now_is_retried() -> None:
    """An active controller whose metadata log failed a write answers UNKNOWN_SERVER_ERROR: a
    starting broker retries, as Kafka's do, instead of failing its start (found by the
    simulation, seed 1741: a broker restarting while the controller's fsyncs failed exited)."""
    channel = ScriptedController(
        [
            BrokerRegistrationResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR),
            BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER),
            BrokerRegistrationResponse(broker_epoch=6),
        ],
        [_beat(False)],
    )
    assert trio.run(_lifecycle(channel).register, []) == 6


def test_an_unreachable_controller_is_retried_within_the_registration_timeout() -> None:
    gone = ControllerUnavailable("BrokerRegistrationRequest got no answer: no controller")
    channel = ScriptedController(
        [gone, BrokerRegistrationResponse(broker_epoch=4)],
        [ControllerUnavailable("no answer to the heartbeat"), _beat(False)],
    )
    assert trio.run(_lifecycle(channel).register, []) == 4


def test_an_unreachable_controller_until_the_timeout_names_the_cause() -> None:
    gone = ControllerUnavailable("BrokerRegistrationRequest got no answer: no controller")

    class Unreachable(ScriptedController):
        async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
            raise gone

    lifecycle = BrokerLifecycle(
        BrokerConfig.from_properties({"initial.broker.registration.timeout.ms": "200"}),
        Unreachable([], []),
        registration=lambda _endpoints, _incarnation: BrokerRegistrationRequest(broker_id=1),
        metadata_offset=lambda: 0,
    )
    with pytest.raises(RegistrationError, match="last: BrokerRegistrationRequest got no answer"):
        trio.run(lifecycle.register, [])


def test_heartbeats_carry_on_after_an_unreachable_controller() -> None:
    channel = ScriptedController(
        [BrokerRegistrationResponse(broker_epoch=2)],
        [_beat(False), ControllerUnavailable("no answer"), _beat(False)],
    )
    lifecycle = _lifecycle(channel)
    trio.run(lifecycle.register, [])
    with pytest.raises(ScriptEnded):
        trio.run(lifecycle.run)  # the failed heartbeat did not end it: the script did
    assert not channel.beats


def test_controlled_shutdown_waits_for_should_shut_down() -> None:
    waiting = BrokerHeartbeatResponse(is_fenced=False, should_shut_down=False)
    done = BrokerHeartbeatResponse(is_fenced=True, should_shut_down=True)
    channel = ScriptedController([], [waiting, waiting, done])
    lifecycle = _lifecycle(channel)
    trio.run(lifecycle.controlled_shutdown)
    assert all(m.want_shut_down for m in channel.sent)  # type: ignore[attr-defined]
    assert len(channel.sent) == 3


def test_random_cluster_ids_never_start_with_a_dash() -> None:
    """Kafka's Uuid.randomUuid() draws again: `-t -Px...` would read as an option."""
    dash_first = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))  # base64 '-' is 62: 0b111110...
    assert kafka_uuid_string(dash_first).startswith("-")
    draws = iter([dash_first, uuid.UUID(int=0), uuid.UUID(int=7)])
    assert new_cluster_id(lambda: next(draws)) == kafka_uuid_string(uuid.UUID(int=7))


def test_a_registered_broker_waits_fenced_past_the_registration_timeout() -> None:
    """initial.broker.registration.timeout.ms bounds registration only, as in Kafka: a broker
    whose metadata takes longer to catch up (a large image loading) stays fenced, heartbeating,
    until the controller unfences it, instead of giving up."""
    config = BrokerConfig.from_properties(
        {"initial.broker.registration.timeout.ms": "1000", "controller.quorum.retry.backoff.ms": "100"}
    )  # fmt: skip
    beats: list[BrokerHeartbeatResponse | Exception] = [_beat(True) for _ in range(50)]
    channel = ScriptedController([BrokerRegistrationResponse(broker_epoch=8)], [*beats, _beat(False)])
    lifecycle = BrokerLifecycle(
        config, channel,
        registration=lambda _endpoints, _incarnation: BrokerRegistrationRequest(broker_id=1),
        metadata_offset=lambda: 3,
    )  # fmt: skip
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> float:
        assert await lifecycle.register([]) == 8
        return trio.current_time()

    waited = trio.run(main, clock=clock)
    assert waited > 4.9  # fifty backoffs of 0.1 s: five times the registration timeout
    assert not lifecycle.fenced
    assert not channel.beats


def test_a_stale_epoch_while_running_registers_again() -> None:
    """A registration request of this incarnation delivered late gives the controller a newer
    registration, so the running broker's heartbeats are STALE_BROKER_EPOCH: it registers
    again and heartbeats with the new epoch (the simulation, seed 1758 on perf22: a broker
    that only logged "registering again" was fenced for the rest of the run)."""
    channel = ScriptedController(
        [BrokerRegistrationResponse(broker_epoch=2), BrokerRegistrationResponse(broker_epoch=8)],
        [_beat(False), _beat(False, ErrorCode.STALE_BROKER_EPOCH), _beat(True), _beat(False)],
    )
    lifecycle = _lifecycle(channel)
    trio.run(lifecycle.register, [])
    with pytest.raises(ScriptEnded):
        trio.run(lifecycle.run)
    assert lifecycle.broker_epoch == 8
    registrations = [m for m in channel.sent if isinstance(m, BrokerRegistrationRequest)]
    assert len(registrations) == 2
    beats = [m.broker_epoch for m in channel.sent if isinstance(m, BrokerHeartbeatRequest)]
    assert beats == [2, 2, 8, 8, 8]  # the last one ends the script
