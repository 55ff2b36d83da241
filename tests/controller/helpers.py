"""Shared builders for controller tests: a bootstrapped controller, requests, commits."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TypeVar

from strom.config import BrokerConfig, Listener
from strom.coordinator.controller import Controller, ControllerResult
from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

R = TypeVar("R")
Topic = CreateTopicsRequest.CreatableTopic


def uuid_source(start: int = 1) -> Callable[[], uuid.UUID]:
    """Deterministic ids: UUID(int=start), UUID(int=start+1), ..."""
    counter = iter(range(start, 2**32))
    return lambda: uuid.UUID(int=next(counter))


def make_controller(props: dict[str, str] | None = None, *, brokers: int = 1) -> Controller:
    """Node 1, bootstrapped and registered; brokers 2..n registered and unfenced too."""
    config = BrokerConfig.from_properties(props or {})
    controller = Controller(config, new_uuid=uuid_source())
    controller.replay(controller.bootstrap())
    register_local(controller, [Listener("PLAINTEXT", "h1", 9092)], broker_epoch=1)
    for broker_id in range(2, brokers + 1):
        add_broker(controller, broker_id)
    return controller


def register_local(
    controller: Controller, endpoints: list[Listener], *, broker_epoch: int, now_ms: int = 0
) -> None:
    """Register this node's broker and unfence it with a heartbeat, as the driver does."""
    request = controller.local_registration(endpoints, uuid.UUID(int=999))
    result = controller.broker_registration(request, broker_epoch=broker_epoch, now_ms=now_ms)
    assert commit(controller, result).error_code == 0
    heartbeat = BrokerHeartbeatRequest(
        broker_id=controller.node_id, broker_epoch=broker_epoch, current_metadata_offset=broker_epoch
    )
    result2 = controller.broker_heartbeat(heartbeat, next_offset=broker_epoch + 1, now_ms=now_ms)
    assert not commit(controller, result2).is_fenced


def add_broker(
    controller: Controller,
    broker_id: int,
    *,
    fenced: bool = False,
    shutting_down: bool = False,
    rack: str | None = None,
) -> None:
    endpoint = RegisterBrokerRecord.BrokerEndpoint("PLAINTEXT", f"h{broker_id}", 9092, 0)
    controller.replay(
        [
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=uuid.UUID(int=1000 + broker_id),
                broker_epoch=100 + broker_id,
                end_points=[endpoint],
                fenced=fenced,
                in_controlled_shutdown=shutting_down,
                rack=rack,
            )
        ]
    )


def commit(controller: Controller, result: ControllerResult[R]) -> R:
    """Replay a command's records (as the driver does after the append); its response."""
    controller.replay(result.records)
    return result.response


def topic(
    name: str,
    partitions: int = 1,
    replication: int = 1,
    *,
    configs: dict[str, str | None] | None = None,
    assignments: Iterable[tuple[int, list[int]]] = (),
) -> CreateTopicsRequest.CreatableTopic:
    return Topic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[
            CreateTopicsRequest.CreatableReplicaAssignment(index, brokers)
            for index, brokers in assignments
        ],
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()
        ],
    )


def create(
    controller: Controller, *topics: Topic, version: int = 7, validate_only: bool = False
) -> CreateTopicsResponse:
    request = CreateTopicsRequest(topics=list(topics), validate_only=validate_only)
    return commit(controller, controller.create_topics(request, version))


def errors(results: Iterable[object]) -> dict[str, int]:
    """name -> error code of response entries that have `name` and `error_code`."""
    return {r.name: r.error_code for r in results}  # type: ignore[attr-defined]
